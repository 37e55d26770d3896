"""The mitmproxy entry script: ``mitmdump -s addon/dragoman.py``.

Keep this to a few import lines: only this file hot-reloads, the package is installed (pip install -e .).
"""

from dragoman.mitm.translate_addon import Translate

addons = [Translate()]
