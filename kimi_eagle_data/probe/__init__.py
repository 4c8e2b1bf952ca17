"""`kimi-data probe`: small EAGLE-3 drafters trained on a dataset, their acceptance measured on held-out prompts."""
