"""Upstream rows -> conversations: readers, adapters, selection, filters, dedup, decontamination, partition config."""
