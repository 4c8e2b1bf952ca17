"""kimi-eagle-data: EAGLE-3 drafter training data for Kimi-K2.5."""

__version__ = "0.1.0"
