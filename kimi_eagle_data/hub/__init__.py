"""The dataset -> the Hub: push with version tags, exports for SpecForge and speculators."""
