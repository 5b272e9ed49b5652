"""Queue features kept out of queues/base.py: dead-lettering, TTL, length limits, ..."""
