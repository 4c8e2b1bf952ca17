"""Model formats that live in their own profile package, one subpackage per format (`kimi_k3/`: Kimi-K3's XTML).

`kimi_eagle_data/profile.py` still holds the registry and Kimi-K2.5's facts; a format that needs code (a
renderer, a completion grammar) keeps it here, beside its data."""
