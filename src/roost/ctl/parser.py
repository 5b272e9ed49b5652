"""The ``roost ctl`` argument parser."""

from __future__ import annotations

import argparse

from roost.ctl import commands as c
from roost.ctl.daily_parser import add_daily_arguments
from roost.ctl.queues import add_queues_arguments


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the management API is, who calls it, the vhost, and the output format."""
    parser.add_argument(
        "--url",
        default=c.env("ROOST_URL", "http://127.0.0.1:15672"),
        help="management API base URL (env ROOST_URL)",
    )
    # api_* dests: subcommands have "user" and "password" arguments of their own
    parser.add_argument(
        "-u",
        "--user",
        dest="api_user",
        default=c.env("ROOST_USER", "guest"),
        help="user name (env ROOST_USER)",
    )
    parser.add_argument(
        "-p",
        "--password",
        dest="api_password",
        default=c.env("ROOST_PASSWORD", "guest"),
        help="password (env ROOST_PASSWORD)",
    )
    parser.add_argument("-V", "--vhost", default="/", help="virtual host (default /)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _policy_set_arguments(st: argparse.ArgumentParser) -> None:
    st.add_argument("name")
    st.add_argument("pattern", help="regular expression over queue/exchange names")
    st.add_argument("definition", help="JSON, e.g. '{\"max-length\": 1000}'")
    st.add_argument("--priority", type=int, default=0)
    st.add_argument(
        "--apply-to",
        default="all",
        help="all, queues, exchanges, classic_queues, quorum_queues or streams",
    )


def add_policies_arguments(parser: argparse.ArgumentParser) -> None:
    """``roost policies list|set|clear``: the policy commands of ``roost ctl``, named as
    the issue names them (``ctl list policies``, ``ctl policy set|clear``)."""
    add_connection_arguments(parser)
    sub = parser.add_subparsers(dest="policies_command", required=True)
    p = sub.add_parser("list", help="list the policies of -V (or every vhost)")
    p.add_argument("-a", "--all-vhosts", action="store_true", help="every vhost, not just -V")
    p.set_defaults(ctl_func=c.cmd_list, kind="policies")
    p = sub.add_parser("set", help="create or replace a policy in -V")
    _policy_set_arguments(p)
    p.set_defaults(ctl_func=c.cmd_policy, action="set")
    p = sub.add_parser("clear", help="delete a policy from -V")
    p.add_argument("name")
    p.set_defaults(ctl_func=c.cmd_policy, action="clear")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    sub = parser.add_subparsers(dest="ctl_command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list objects")
    p.add_argument("kind", choices=sorted(c.LISTS))
    p.add_argument("-a", "--all-vhosts", action="store_true", help="every vhost, not just -V")
    p.set_defaults(ctl_func=c.cmd_list)

    sub.add_parser("overview", help="totals and rates").set_defaults(ctl_func=c.cmd_overview)

    declare = sub.add_parser("declare", help="declare a queue, exchange or binding")
    dsub = declare.add_subparsers(dest="what", required=True)
    q = dsub.add_parser("queue")
    q.add_argument("name")
    x = dsub.add_parser("exchange")
    x.add_argument("name")
    x.add_argument("type", nargs="?", default="direct")
    x.add_argument("--internal", action="store_true")
    for sp in (q, x):
        sp.add_argument("--transient", action="store_true", help="not durable")
        sp.add_argument("--auto-delete", action="store_true")
        sp.add_argument("--argument", action="append", metavar="KEY=VALUE")
    b = dsub.add_parser("binding")
    b.add_argument("source")
    b.add_argument("destination")
    b.add_argument("--destination-type", choices=("queue", "exchange"), default="queue")
    b.add_argument("--routing-key", default="")
    b.add_argument("--argument", action="append", metavar="KEY=VALUE")
    ss = dsub.add_parser("super_stream", help="a super stream and its partition streams")
    ss.add_argument("name")
    how = ss.add_mutually_exclusive_group(required=True)
    how.add_argument("--partitions", type=int, help="N partitions: NAME-0 .. NAME-(N-1)")
    how.add_argument("--binding-keys", "--routing-keys", dest="binding_keys",
                     help="comma-separated keys: one partition NAME-KEY each")
    ss.add_argument("--argument", action="append", metavar="KEY=VALUE",
                    help="for every partition stream, e.g. x-max-age=7D")
    declare.set_defaults(ctl_func=c.cmd_declare)

    delete = sub.add_parser("delete", help="delete a queue, exchange or binding")
    dl = delete.add_subparsers(dest="what", required=True)
    dl.add_parser("queue").add_argument("name")
    dl.add_parser("exchange").add_argument("name")
    dl.add_parser("super_stream").add_argument("name")
    db = dl.add_parser("binding")
    db.add_argument("source")
    db.add_argument("destination")
    db.add_argument("properties_key", help="from 'list bindings'")
    db.add_argument("--destination-type", choices=("queue", "exchange"), default="queue")
    delete.set_defaults(ctl_func=c.cmd_delete)

    p = sub.add_parser("purge", help="drop a queue's ready messages")
    p.add_argument("queue")
    p.set_defaults(ctl_func=c.cmd_purge)

    p = sub.add_parser("publish", help="publish one message")
    p.add_argument("exchange", help="exchange ('' or amq.default for the default one)")
    p.add_argument("routing_key")
    p.add_argument("payload", help="the body, or - to read it from stdin")
    p.add_argument("--property", action="append", metavar="KEY=VALUE")
    p.set_defaults(ctl_func=c.cmd_publish)

    p = sub.add_parser("get", help="fetch messages (requeued unless --ack)")
    p.add_argument("queue")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--ack", action="store_true", help="remove the messages from the queue")
    p.set_defaults(ctl_func=c.cmd_get)

    p = sub.add_parser("user", help="add or delete a user")
    us = p.add_subparsers(dest="action", required=True)
    add = us.add_parser("add")
    add.add_argument("name")
    # dest names differ from the global -u/-p, which subcommand options would overwrite
    add.add_argument("--password", dest="new_password")
    add.add_argument("--password-hash", dest="new_password_hash")
    add.add_argument("--tags", help="comma-separated, e.g. administrator")
    us.add_parser("delete").add_argument("name")
    p.set_defaults(ctl_func=c.cmd_user)

    p = sub.add_parser("vhost", help="add or delete a vhost")
    vs = p.add_subparsers(dest="action", required=True)
    add = vs.add_parser("add")
    add.add_argument("name")
    add.add_argument("--description")
    vs.add_parser("delete").add_argument("name")
    p.set_defaults(ctl_func=c.cmd_vhost)

    p = sub.add_parser("permissions", help="set or clear a user's permissions in -V")
    ps = p.add_subparsers(dest="action", required=True)
    st = ps.add_parser("set")
    st.add_argument("user")
    for name in ("configure", "write", "read"):
        st.add_argument(f"--{name}", default=".*")
    ps.add_parser("clear").add_argument("user")
    p.set_defaults(ctl_func=c.cmd_permissions)

    p = sub.add_parser("policy", help="set or clear a policy in -V")
    pl = p.add_subparsers(dest="action", required=True)
    _policy_set_arguments(pl.add_parser("set"))
    pl.add_parser("clear").add_argument("name")
    p.set_defaults(ctl_func=c.cmd_policy)

    p = sub.add_parser("close-connection", help="close a connection with a reason")
    p.add_argument("name")
    p.add_argument("--reason", default="closed by roost ctl")
    p.set_defaults(ctl_func=c.cmd_close)

    p = sub.add_parser(
        "set-vm-memory-high-watermark",
        help="set the memory alarm threshold: a fraction of RAM (0.4) or a size (512MiB)",
    )
    p.add_argument("limit")
    p.set_defaults(ctl_func=c.cmd_set_memory_watermark)

    p = sub.add_parser(
        "set-disk-free-limit", help="set the disk alarm threshold (50MB, 2GiB, mem_relative:1.0)"
    )
    p.add_argument("limit")
    p.set_defaults(ctl_func=c.cmd_set_disk_free_limit)

    p = sub.add_parser("definitions", help="export or import definitions (RabbitMQ JSON)")
    ds = p.add_subparsers(dest="action", required=True)
    ex = ds.add_parser("export")
    ex.add_argument("file", help="output file, or - for stdout")
    im = ds.add_parser("import")
    im.add_argument("file", help="input file, or - for stdin")
    im.add_argument("--chunk", type=int, default=500, help="objects per request")
    for sp in (ex, im):
        sp.add_argument("--only-vhost", action="store_true", help="just the -V vhost")
    p.set_defaults(ctl_func=c.cmd_definitions)
    add_daily_arguments(sub)
    add_queues_arguments(sub)
