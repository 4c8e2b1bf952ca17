"""What the bundled sample rows say, per config (make_samples.py puts it into each upstream's schema)."""

from __future__ import annotations

from sample_content.chat import b1_content, b6_content, b7_content
from sample_content.coding import b2_content, b3_content
from sample_content.reasoning import b4_content, b5_content
from sample_content.swe import b8_content

__all__ = ["b1_content", "b2_content", "b3_content", "b4_content", "b5_content", "b6_content", "b7_content", "b8_content"]
