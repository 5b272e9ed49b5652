"""The ready-made jobs as a file for ``spark-submit``, which takes a Python file, not a
module: the same arguments as ``roost pipeline``::

    spark-submit --master spark://HOST:7077 "$(roost pipeline job-file)" etl --url … --once
    python "$(roost pipeline job-file)" etl …     # local[*], like roost pipeline etl

Under spark-submit the master is spark-submit's (``--master``, spark-defaults.conf or its
local[*] default): the jobs never set one in code unless ``--master`` is passed to them.
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    from roost.pipeline import cli

    parser = argparse.ArgumentParser(prog="submit.py", description=cli.__doc__)
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
