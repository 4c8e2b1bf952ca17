"""The command line: thin wiring of options to the pipeline, reports and hub."""
