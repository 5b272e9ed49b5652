"""MQTT 3.1, 3.1.1 and 5.0: the sans-IO codec (the adapter comes with the core's adapter port)."""
