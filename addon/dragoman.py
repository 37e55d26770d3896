"""The mitmproxy entry script: ``mitmdump -s addon/dragoman.py``.

Keep this to a few import lines: only this file hot-reloads, the package is installed (pip install -e .).
"""

from dragoman.mitm.chain import Chain
from dragoman.mitm.endpoints import Endpoints
from dragoman.mitm.guards.admission import Admission
from dragoman.mitm.guards.client_auth import ClientAuth
from dragoman.mitm.guards.cors import Cors
from dragoman.mitm.guards.direct import DirectGuard
from dragoman.mitm.guards.responsive import Responsive
from dragoman.mitm.guards.scrub import FlowScrub
from dragoman.mitm.recording.recorder import Recorder
from dragoman.mitm.recording.replayer import Replayer
from dragoman.mitm.responses.api import ResponsesApi
from dragoman.mitm.responses.compact import Compact
from dragoman.mitm.responses.socket import ResponsesSocket
from dragoman.mitm.translate_addon import Translate

# translate.gate first: the request-body caps (size, compressed bodies) hold before anything reads the body;
# its last half (gate.after) sends an answer set for a held chunked body out through the relay.
# Cors next: a browser's preflight carries no key and is answered before ClientAuth (with
# dragoman_cors_origins; without it, browser requests are refused while Dragoman holds keys and has no client keys); its second half, right after Translate, sets the CORS headers of the answer the client gets.
# ClientAuth next: no flow without a client key (when client keys are configured) reaches anything else.
# Endpoints next: it answers HEAD /, /v1/models, count_tokens and WebSocket upgrades before Translate looks
# ResponsesSocket before Endpoints: it takes Responses WebSocket upgrades (Endpoints refuses the others with 426).
# ResponsesApi next: GET/DELETE /v1/responses/{id} and input_items from the response store
# Compact next: POST /v1/responses/compact on a non-Responses upstream becomes a summarising turn; its second
# half, right after Translate, turns the answer into the compacted response Codex reads.
# DirectGuard first: a transparent-mode connection straight to this machine is never taken for an API host's.
# FlowScrub in two halves: `.mark` (first) notes which flows are Dragoman's before anything rewrites where they
# go; the addon itself (after the others, before mitmproxy's save/dumper) scrubs them at their end.
# Replayer/Recorder come in two halves: `.before` sees the client's request before Translate rewrites it,
# the addon itself sees the translated request and wraps the stream callable Translate installed.
cors = Cors()
recorder = Recorder()
replayer = Replayer()
translate = Translate()
compact = Compact()
scrub = FlowScrub()
# Chain: mitmproxy dispatches each hook to one object, which calls the parts in this order (issue 31).
addons = [
    Chain(
        [
            Responsive(),
            DirectGuard(),
            scrub.mark,
            translate.gate,
            cors,
            ClientAuth(),
            ResponsesSocket(),
            Endpoints(),
            ResponsesApi(),
            compact,
            replayer.before,
            recorder.before,
            translate,
            Admission(translate),
            compact.after,
            cors.after,
            replayer,
            recorder,
            scrub,
            translate.gate.after,
        ]
    )
]
