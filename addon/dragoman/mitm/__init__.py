"""The mitmproxy shell: the ONLY package that imports mitmproxy.

Owns the addon classes (``Translate``) and the per-flow state they keep. It may import every other
Dragoman package; nothing imports it except the ``-s`` entry script (``addon/dragoman.py``) and the CLI.
"""
