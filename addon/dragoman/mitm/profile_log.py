"""What the log says about provider profiles: each openai-chat upstream's profile once at start (and when a
reload changes it), and one line per flow when a placeholder stood in for reasoning state the history lacked."""

from __future__ import annotations

import logging

from dragoman.protocols.base import Context
from dragoman.routing.spec import Config
from dragoman.routing.spec import describe_profile

logger = logging.getLogger(__name__)


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
