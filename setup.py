"""Package discovery (the rest of the metadata is in pyproject.toml).

Packages are found, never listed, so no subpackage can go missing from a wheel. The data folders (the tiny models in
`assets/`, the engines' CPU recipes, the sample sources, the sbatch templates) are found as namespace packages too:
setuptools ships a folder's data under its own package, and warns of every data folder left out of `packages`.
`builders/` and `cards/` sit at the top of the repository (a `datasets` builder and the card template are easier to find there) and install as
`kimi_eagle_data.builders` and `kimi_eagle_data.cards` (pyproject's `package-dir`); their subpackages, if any, are
found the same way.
"""

from setuptools import find_namespace_packages, setup

MAPPED = ("builders", "cards")


def found(where: str) -> list[str]:
    return find_namespace_packages(where, exclude=["*__pycache__"])


packages = ["kimi_eagle_data"] + [f"kimi_eagle_data.{sub}" for sub in found("kimi_eagle_data")]
for top in MAPPED:
    packages += [f"kimi_eagle_data.{top}"] + [f"kimi_eagle_data.{top}.{sub}" for sub in found(top)]

setup(packages=packages)
