"""wanbench: load generation and WAN emulation for event-driven servers."""

__version__ = "0.1.0"
