"""``roost ctl``: the operator CLI. A client of the management HTTP API only: it never
imports the broker, so it works against any Roost (or RabbitMQ) node it can reach."""
