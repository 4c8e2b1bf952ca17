"""Conversations -> prompt ids: the model's tokenizer and template, tool declarations, prepare."""
