"""Package discovery (the rest of the metadata is in pyproject.toml).

Packages are found, never listed, so no subpackage can go missing from a wheel. `builders/` and `cards/` sit at the
top of the repository (a `datasets` builder and the card template are easier to find there) and install as
`kimi_eagle_data.builders` and `kimi_eagle_data.cards` (pyproject's `package-dir`); their subpackages, if any, are
found the same way.
"""

from setuptools import find_packages, setup

MAPPED = ("builders", "cards")

packages = find_packages(include=["kimi_eagle_data", "kimi_eagle_data.*"])
for top in MAPPED:
    packages += [f"kimi_eagle_data.{top}"] + [f"kimi_eagle_data.{top}.{sub}" for sub in find_packages(top)]

setup(packages=packages)
