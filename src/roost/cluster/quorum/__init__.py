"""Replicated quorum queues on a cluster (issue 22): a leader per queue elected through
etcd, its log shipped to the other members over the links, confirms at a majority."""
