"""Rooms and people (seed 003): the Anchor, speaker-labelled transcripts, memory commands
in the conversation, forgetting, the archive tier, lifecycle limits, backup and restore."""

from memlane.rooms.anchor import (
    DEFAULT_ANCHOR_ID,
    anchor_id,
    display_name,
    ensure_room,
    is_anchor,
    label_messages,
    render_transcript,
    speaker_label,
)
from memlane.rooms.commands import Command, is_command, parse_command

__all__ = [
    "DEFAULT_ANCHOR_ID",
    "Command",
    "anchor_id",
    "display_name",
    "ensure_room",
    "is_anchor",
    "is_command",
    "label_messages",
    "parse_command",
    "render_transcript",
    "speaker_label",
]
