"""Start-up: bring back every stream found under the data directory.

Streams describe themselves in ``meta.json`` (vhost, name, arguments), so they come back
even before (or without) persisted definitions; a stream already declared is left alone.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from roost.core.queues.stream import StreamQueue

if TYPE_CHECKING:
    from roost.core.broker import Broker

log = logging.getLogger("roost.stream")


def recover_streams(broker: Broker, data_dir: Path) -> int:
    count = 0
    for meta_path in sorted(data_dir.glob("vhosts/*/streams/*/meta.json")):
        try:
            meta = json.loads(meta_path.read_text())
            vhost_name, name, arguments = meta["vhost"], meta["name"], meta["arguments"]
        except (OSError, ValueError, KeyError) as exc:
            log.warning("skipping stream directory %s: %s", meta_path.parent, exc)
            continue
        vhost = broker.vhosts.get(vhost_name)
        if vhost is None or name in vhost.queues:
            continue
        vhost.queues[name] = StreamQueue(vhost, name, durable=True, arguments=arguments)
        count += 1
    if count:
        log.info("recovered %d stream(s)", count)
    return count
