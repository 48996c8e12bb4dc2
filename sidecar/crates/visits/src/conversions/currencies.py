#!/usr/bin/env python3
"""Writes currencies.rs: ISO 4217's active currencies and their minor-unit exponents, from the
`iso4217` package (the SIX list it ships, its version printed in the file). Codes without a minor
unit (XAU, XDR: "N.A.") are left out: a conversion value needs one.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install iso4217 && /tmp/v/bin/python currencies.py
"""
import iso4217, pathlib

rows = sorted((c.code, c.exponent) for c in iso4217.Currency if c.exponent is not None)
lines = [
    "//! ISO 4217 currencies and their minor-unit exponents: written by `currencies.py` from",
    f"//! the `iso4217` Python package {iso4217.__version__} (list published {iso4217.__published__:%Y-%m-%d}). Do not edit.",
    "",
    "/// (code, exponent), sorted by code.",
    "pub const CURRENCIES: &[(&str, u8)] = &[",
]
lines += [f'    ("{code}", {exp}),' for code, exp in rows]
lines += ["];", ""]
pathlib.Path(__file__).with_name("currencies.rs").write_text("\n".join(lines))
