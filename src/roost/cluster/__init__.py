"""Roost's cluster: nodes coordinated by etcd (membership, definitions, leaders) and
linked node to node for the data plane. See docs/cluster.md."""
