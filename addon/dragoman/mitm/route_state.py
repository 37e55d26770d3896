"""``Routing``: the routing configuration in force and the key pools' state, for the Translate addon.

Built from the routes file (``dragoman_config``) or from the single-upstream options (the shorthand for one
upstream and a catch-all route). The routes file is reloaded when it changes (checked every
``RELOAD_INTERVAL`` seconds while mitmproxy runs); a broken new version is refused with the same message a
startup would give, and the old routes keep serving. Key pools keep their resting state across reloads.

Also what the log says about provider profiles: each openai-chat upstream's profile once at start (and when a
reload changes it), and one line per flow when a placeholder stood in for reasoning state the history lacked.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from dragoman.logsafe import logsafe
from dragoman.protocols.base import Context
from dragoman.routing.load import ConfigError
from dragoman.routing.load import load_config
from dragoman.routing.pool import KeyPool
from dragoman.routing.router import Router
from dragoman.routing.spec import Config
from dragoman.routing.spec import describe_profile

logger = logging.getLogger(__name__)

RELOAD_INTERVAL = 2.0


def log_profiles(config: Config, logged: set[str]) -> None:
    """Each openai-chat upstream's profile, unless ``logged`` already has that line."""
    for up in config.upstreams.values():
        how = describe_profile(up)
        line = f"upstream {up.name}: provider profile {how}"
        if how is not None and line not in logged:
            logged.add(line)
            logger.info("%s", line)


def log_placeholders(flow_id: str, tctx: Context) -> None:
    if tctx.placeholders:
        logger.info(
            "flow %s: the history has no %s for this upstream (another model produced those turns); sent the "
            "%s profile's placeholder",
            flow_id,
            " / ".join(sorted(tctx.placeholders)),
            tctx.profile.name,
        )


def read_config(path: Path) -> Config:
    """Load a routes file. Raises ``ConfigError`` (naming the file) for anything wrong, I/O included."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the routes file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the routes file is not UTF-8 text") from None
    return load_config(text, str(path), os.environ)


class Routing:
    __slots__ = ("config", "router", "pools", "path", "_stamp", "_task", "_logged")

    def __init__(self) -> None:
        #: None: Dragoman is off (no target and no routes file)
        self.config: Config | None = None
        self.router: Router | None = None
        self.pools: dict[str, KeyPool] = {}
        #: the routes file, when routes come from one
        self.path: Path | None = None
        self._stamp: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._logged: set[str] = set()

    def install(self, config: Config | None, path: Path | None = None) -> None:
        old = self.pools
        pools: dict[str, KeyPool] = {}
        if config is not None:
            for name, upstream in config.upstreams.items():
                pool = KeyPool(name, upstream.keys)
                if name in old:
                    pool.carry_from(old[name])
                pools[name] = pool
        if config is not None:
            log_profiles(config, self._logged)
        self.config = config
        self.router = Router(config) if config is not None else None
        self.pools = pools
        self.path = path
        self._stamp = _stamp(path) if path is not None else None

    def load_file(self, path: Path) -> None:
        """Load and install ``path``; raises ``ConfigError`` and leaves the routes in force untouched."""
        config = read_config(path)
        self.install(config, path)
        logger.info(
            "routes from %s: %d upstream(s) (%s), %d route(s), %d client key(s)",
            path,
            len(config.upstreams),
            ", ".join(f"{u.name}: {u.protocol.value}, {len(u.keys)} key(s)" for u in config.upstreams.values()),
            len(config.routes),
            len(config.clients),
        )

    def check_reload(self) -> bool:
        """Reload the routes file if it changed on disk. True when new routes were installed."""
        path = self.path
        if path is None:
            return False
        stamp = _stamp(path)
        if stamp == self._stamp:
            return False
        self._stamp = stamp  # a broken version is reported once, not every interval
        try:
            config = read_config(path)
        except ConfigError as e:
            logger.error("routes file changed but cannot be used, the previous routes keep serving: %s", logsafe(e))
            return False
        self.install(config, path)
        logger.info("routes file %s reloaded: %d route(s)", path, len(config.routes))
        return True

    def start_watching(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())

    def stop_watching(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(RELOAD_INTERVAL)
            try:
                self.check_reload()
            except Exception:  # noqa: BLE001 - the watcher must survive anything
                logger.exception("checking the routes file failed")


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)
