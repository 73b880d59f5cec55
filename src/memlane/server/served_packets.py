"""The packets this server sent, by fingerprint, for the response cache routes.

A REST client gets a context packet (``POST /v1/sessions/{id}/context``) with its
``fingerprint``: the digest of the packet as built. Sending that fingerprint with a
response-cache lookup or store names exactly the packet the client's model got, so the
server fingerprints that packet instead of building the turn's packet again (which cost a
full build per call, and could differ from what the model saw if anything changed since).

Packets are kept here for :data:`SERVED_TTL_SECONDS`: in this process (a bounded LRU)
and, with ``redis_url``, in the shared hot cache, so the instance behind a load balancer
that gets the lookup finds the packet another one sent. A fingerprint that is unknown
(expired, evicted, another deployment) or names a packet one of whose messages or
notes was forgotten (or a note superseded) since is not an error: the route builds the packet from
``max_tokens``/``strategy`` as it did before fingerprints.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from memlane.context.packet import ContextPacket
from memlane.hot_packets import decode_packet, encode_packet, packets_tag
from memlane.lru import LRUCache

if TYPE_CHECKING:
    from fastapi import Request

    from memlane.bus.shared_cache import HotCache
    from memlane.ports import MessageLog, NoteRepository

__all__ = ["SERVED_TTL_SECONDS", "ServedPackets", "served_packets"]

#: How long a fingerprint names its packet: a turn's lookup and store come within it.
SERVED_TTL_SECONDS = 900.0
#: Packets one process keeps without a shared cache (a few hundred KB at most).
_LOCAL = 256


class ServedPackets:
    """Packets sent to clients, by fingerprint (tenant-checked by the routes: a packet names
    its session's key, which belongs to one tenant)."""

    def __init__(self, hot: HotCache | None) -> None:
        self.hot = hot
        self._local: LRUCache[str, bytes] = LRUCache(_LOCAL, ttl_seconds=SERVED_TTL_SECONDS)
        self.counts = {"kept": 0, "found": 0, "unknown": 0}

    def keep(self, packet: ContextPacket, tenant_id: str) -> str:
        """Remember ``packet``; its fingerprint (what the client sends back)."""
        raw = encode_packet(packet)
        fingerprint = "pk1_" + hashlib.sha256(raw).hexdigest()[:40]
        self._local.put(fingerprint, raw)
        if self.hot is not None:
            # tagged with the tenant's packets: an erase drops what may quote the erased
            self.hot.set(f"served:{fingerprint}", raw, ttl_seconds=SERVED_TTL_SECONDS,
                         tags=[packets_tag(tenant_id), packets_tag(None)])
        self.counts["kept"] += 1
        return fingerprint

    def find(self, fingerprint: str, log: MessageLog, notes: NoteRepository | None) -> ContextPacket | None:
        """The packet sent with ``fingerprint``, or None when this server no longer knows it
        or a message or note in it was forgotten or superseded since (an answer must never
        be stored with a source that is gone: nothing would drop it)."""
        raw = self._local.get(fingerprint)
        if raw is None and self.hot is not None:
            raw = self.hot.get(f"served:{fingerprint}")
        packet = None if raw is None else decode_packet(raw)
        if packet is not None:
            ids = {m.id for m in [*packet.recent_turns, *packet.pinned_messages,
                                  *(r.message for r in packet.recalled)] if m.id is not None}
            gone = bool(ids) and len(log.get_messages(sorted(ids))) < len(ids)
            if notes is not None and not gone:
                wanted = set(packet.note_ids)
                current = [n for n in notes.get_notes(sorted(wanted)) if n.valid_to is None]
                gone = len(current) < len(wanted)
            if gone:
                self._local.pop(fingerprint)
                packet = None
        self.counts["found" if packet is not None else "unknown"] += 1
        return packet


def served_packets(request: Request) -> ServedPackets:
    """The app's packets sent to clients (made at first use)."""
    state = request.app.state
    found: ServedPackets | None = getattr(state, "served_packets", None)
    if found is None:
        mem = state.mem
        found = state.served_packets = ServedPackets(mem.hot_cache if mem.settings.redis_url else None)
    return found
