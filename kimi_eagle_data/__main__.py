"""`python -m kimi_eagle_data` runs the `kimi-data` CLI."""

from .cli import main

main()
