"""`python -m kimi_eagle_data` runs the `kimi-data` CLI."""

from kimi_eagle_data.cli.main import main

main()
