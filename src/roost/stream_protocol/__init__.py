"""RabbitMQ's stream protocol (port 5552): the sans-IO codec; the adapter comes later."""
