"""STOMP 1.0/1.1/1.2 adapter: sans-IO frames, destinations, and the connection handler."""
