"""The media-stream wire that phone providers speak to voice agents, both sides of it: `ttfat probe` is the
caller's side, `ttfat serve-agent` the agent's.

`twilio`: Twilio Media Streams. Text frames, each a JSON object with an `event`: the caller's side sends
`connected`, `start` (with the `streamSid` every later message carries), then `media` (base64 G.711
μ-law at 8 kHz, 20 ms a message, as a line carries it, silence included), `mark` when the audio before
a mark the agent sent has played, and `stop`. The agent's side sends `media`, `mark` and `clear` (drop
what has not played). Telnyx, Plivo, Exotel and Vonage speak close variants.
`pcm`: binary frames of 16-bit little-endian mono PCM at a given rate both ways, nothing else (the demos
of many agents speak this).

A message that breaks the protocol raises `WireError`: the call it came on fails with that reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from dataclasses import dataclass

import numpy as np

PROTOCOLS = ("twilio", "pcm")
TWILIO_RATE = 8000
FRAME_MS = 20  # what a line sends in one message


class WireError(ValueError):
    """A message that is not what the protocol says (the message names what is wrong)."""


# --- G.711 μ-law -----------------------------------------------------------------------------------------

_BIAS, _CLIP = 0x84, 32635


def ulaw_encode(samples: np.ndarray) -> bytes:
    """float32 in -1..1 (or int16) -> G.711 μ-law bytes, one a sample."""
    x = samples if samples.dtype == np.int16 else np.clip(samples * 32768, -32768, 32767).astype(np.int16)
    x = x.astype(np.int32)
    sign = np.where(x < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(x), _CLIP) + _BIAS
    exponent = np.floor(np.log2(magnitude >> 7 | 1)).astype(np.int32)  # the top bit above bit 7: 0..7
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return (~(sign | exponent << 4 | mantissa) & 0xFF).astype(np.uint8).tobytes()


def ulaw_decode(data: bytes) -> np.ndarray:
    """G.711 μ-law bytes -> float32 in -1..1."""
    u = ~np.frombuffer(data, dtype=np.uint8).astype(np.int32) & 0xFF
    exponent, mantissa = (u >> 4) & 0x07, u & 0x0F
    magnitude = (((mantissa << 3) + _BIAS) << exponent) - _BIAS
    return (np.where(u & 0x80, -magnitude, magnitude) / 32768).astype(np.float32)


def pcm16_decode(data: bytes) -> np.ndarray:
    if len(data) % 2:
        raise WireError(f"a PCM frame of {len(data)} bytes: 16-bit samples come in pairs of bytes")
    return (np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768).astype(np.float32)


def pcm16_encode(samples: np.ndarray) -> bytes:
    return np.clip(samples * 32768, -32768, 32767).astype("<i2").tobytes()


# --- what arrives -----------------------------------------------------------------------------------------


@dataclass
class Media:
    samples: np.ndarray  # float32 at the wire's rate


@dataclass
class Mark:
    name: str


@dataclass
class Clear:
    pass


@dataclass
class Start:
    stream_sid: str
    call_sid: str
    parameters: dict  # the caller's customParameters (a probe names its call there: `call`)


@dataclass
class Stop:
    pass


Message = Media | Mark | Clear | Start | Stop | None  # None: an event the receiver may ignore


class Twilio:
    """Twilio Media Streams messages, for either side (`stream_sid` names the stream)."""

    name, rate, binary = "twilio", TWILIO_RATE, False

    def __init__(self, stream_sid: str = "MZttfat", call_sid: str = "CAttfat", call: str | None = None):
        """`call`: the call's name, sent as the `start` message's custom parameter `call`."""
        self.stream_sid, self.call_sid, self.call = stream_sid, call_sid, call
        self.sequence = 0
        self.chunk = 0

    def _event(self, event: str, **body) -> str:
        self.sequence += 1
        return json.dumps(
            {"event": event, "sequenceNumber": str(self.sequence), "streamSid": self.stream_sid, **body}
        )

    # the caller's side (a phone provider)
    def opening(self) -> list[str]:
        start = {
            "streamSid": self.stream_sid,
            "callSid": self.call_sid,
            "accountSid": "ACttfatprobe",
            "tracks": ["inbound"],
            "customParameters": {"call": self.call} if self.call else {},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": TWILIO_RATE, "channels": 1},
        }
        self.sequence += 1
        connected = json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        return [connected, self._event("start", start=start)]

    def carried(self, samples: np.ndarray) -> np.ndarray:
        """`samples` as the other side decodes them (μ-law's rounding)."""
        return ulaw_decode(ulaw_encode(samples))

    def caller_media(self, samples: np.ndarray, timestamp_ms: int) -> str:
        self.chunk += 1
        payload = base64.b64encode(ulaw_encode(samples)).decode()
        media = {"track": "inbound", "chunk": str(self.chunk), "timestamp": str(timestamp_ms)}
        return self._event("media", media={**media, "payload": payload})

    def mark_played(self, name: str) -> str:
        return self._event("mark", mark={"name": name})

    def closing(self) -> str:
        return self._event("stop", stop={"accountSid": "ACttfatprobe", "callSid": self.call_sid})

    # the agent's side
    def agent_media(self, samples: np.ndarray) -> str:
        payload = base64.b64encode(ulaw_encode(samples)).decode()
        return json.dumps({"event": "media", "streamSid": self.stream_sid, "media": {"payload": payload}})

    def clear(self) -> str:
        return json.dumps({"event": "clear", "streamSid": self.stream_sid})

    # either side
    def parse(self, message: str | bytes) -> Message:
        if isinstance(message, bytes):
            raise WireError(f"a binary message of {len(message)} bytes: Twilio media streams send JSON text")
        try:
            data = json.loads(message)
        except json.JSONDecodeError as e:
            raise WireError(f"a message that is not JSON ({e.msg}): {message[:60]!r}") from None
        if not isinstance(data, dict) or not isinstance(data.get("event"), str):
            raise WireError(f"a message with no event: {message[:60]!r}")
        try:
            return self._parse(data)
        except (KeyError, TypeError, AttributeError) as e:
            raise WireError(f"a {data['event']} message without {e}: {message[:80]!r}") from None

    def _parse(self, data: dict) -> Message:
        event = data["event"]
        if event == "media":
            try:
                payload = base64.b64decode(data["media"]["payload"], validate=True)
            except (binascii.Error, ValueError):
                raise WireError("a media message whose payload is not base64") from None
            return Media(ulaw_decode(payload))
        if event == "mark":
            return Mark(str(data["mark"]["name"]))
        if event == "clear":
            return Clear()
        if event == "start":
            start = data["start"]
            self.stream_sid = start.get("streamSid") or data.get("streamSid") or self.stream_sid
            return Start(self.stream_sid, str(start.get("callSid", "")), start.get("customParameters") or {})
        if event == "stop":
            return Stop()
        return None  # connected, dtmf, and what a variant adds


class Pcm:
    """Binary 16-bit PCM frames at `rate`, both ways; text frames are ignored."""

    name, binary = "pcm", True

    def __init__(self, rate: int = 16000):
        self.rate = rate

    def opening(self) -> list[bytes]:
        return []

    def carried(self, samples: np.ndarray) -> np.ndarray:
        """`samples` as the other side decodes them (16-bit rounding)."""
        return pcm16_decode(pcm16_encode(samples))

    def caller_media(self, samples: np.ndarray, timestamp_ms: int) -> bytes:
        return pcm16_encode(samples)

    def mark_played(self, name: str) -> None:
        return None

    def closing(self) -> None:
        return None

    def agent_media(self, samples: np.ndarray) -> bytes:
        return pcm16_encode(samples)

    def clear(self) -> None:
        return None  # raw PCM has no way to say it

    def parse(self, message: str | bytes) -> Message:
        if isinstance(message, str):
            return None
        return Media(pcm16_decode(message))


def protocol(name: str, rate: int = 16000, call: str = "") -> Twilio | Pcm:
    """The caller's side of a wire for the call named `call`."""
    if name == "twilio":
        sid = hashlib.sha1(f"{call}{time.time_ns()}".encode()).hexdigest()[:32]
        return Twilio(f"MZ{sid}", f"CA{sid}", call or None)
    if name == "pcm":
        return Pcm(rate)
    raise WireError(f"the protocol must be one of {PROTOCOLS}, not {name!r}")
