"""Make the sample support calls in recordings/ and their manifest, deterministically.

The replay benchmark needs calls whose timing truth is known exactly: when each caller turn really
ends (t0, docs/timing.md) and what a correct answer must say. Real recordings cannot give that
to the millisecond, so the caller is the bundled piper voice (noise_scale=0: piper's own noise cannot
be seeded) and every other choice is seeded:

- voices differ by speaking rate (length_scale) and a small pitch/formant shift, made by reading the
  22050 Hz synthesis as a slightly faster or slower rate while resampling (soxr) to the file's rate;
- pauses between turns leave the agent time to answer; some calls get background noise (pink,
  brown, mains hum, line hiss, babble of other agents) at a stated SNR, others none; babble stays
  >= 32 dB down, as webrtcvad takes background talkers for speech (modes 1-2 even at 40 dB) and the
  caller's turns would never end;
- formats vary the way real files do: 16 kHz FLAC mostly, an 8 kHz telephone-band mu-law WAV,
  22.05/44.1/48 kHz, a stereo file with the caller on one channel, OGG/Vorbis and MP3;
- order ids and products come from the bundled store's *heldout* split (never seen in training),
  picked by a seeded generator, and the facts an answer must state come from the project's own
  answer logic (llm.support.policy: order_answer / stock_answer / DIRECT_ANSWERS).

Turn boundaries (speech_start_s / speech_end_s) are measured on the clean caller track at the file's
rate, after resampling and band limiting but before noise: first and last sample above 1% of full
scale; in noisy calls, narrowed to where the speech is louder than the noise under it (`audible`).
Usage, from the repo root: ``python recordings/make_recordings.py [--only CALL] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make the project's packages importable

from llm.support.policy import DIRECT_ANSWERS, order_answer, stock_answer  # noqa: E402
from llm.support.splits import in_heldout_id, split_items  # noqa: E402
from llm.support.spoken import say_order_id  # noqa: E402
from llm.support.store import NOT_CARRIED, STATUSES, Store  # noqa: E402
from tts.piper import Synthesizer  # noqa: E402

HERE = Path(__file__).resolve().parent
MANIFEST = "manifest.jsonl"
VOICE_RATE = 22050
THRESHOLD = 0.01  # speech boundaries: first/last sample above 1% of full scale
LEAD_S = (0.5, 1.5)  # silence before the first turn
GAP_S = (3.5, 7.0)  # from the end of one turn to the start of the next: the agent answers here
TAIL_S = 1.5  # after the last turn
ANSWER_DELAY_S = 0.8  # stereo call: the agent's answer starts this long after the caller stops
POLICY_INTENTS = ("hours", "shipping", "return_policy")  # direct answers that carry store facts
CODECS = {  # format name -> (extension, soundfile format, subtype)
    "flac": ("flac", "FLAC", "PCM_16"),
    "wav": ("wav", "WAV", "PCM_16"),
    "ulaw": ("wav", "WAV", "ULAW"),
    "ogg": ("ogg", "OGG", "VORBIS"),
    "mp3": ("mp3", "MP3", "MPEG_LAYER_III"),
}


@dataclass(frozen=True)
class Turn:
    say: str  # what the caller says (punctuated for the voice); {id} and {product} are filled in
    intent: str
    order: str | None = None  # status of the order to pick, or "same" for the previous turn's order
    id_form: str = "words"  # how the id is spoken (llm.support.spoken.say_order_id)
    product: str | None = None  # "in_stock", "out_of_stock" or "missing"


@dataclass(frozen=True)
class Call:
    name: str
    turns: tuple[Turn, ...]
    length_scale: float  # piper speaking rate: > 1 is slower
    pitch: float  # > 1 is higher (and a little faster)
    level_db: float  # peak level of the caller's speech, dB full scale
    noise: str | None = None  # pink | brown | hum | hiss | babble
    snr_db: float | None = None
    rate: int = 16000
    codec: str = "flac"
    stereo: bool = False  # caller on channel 1, the agent's answers (quieter) on channel 0
    telephone: bool = False  # band-limited to 300-3400 Hz


CALLS = [
    Call(
        "call01",
        (
            Turn("Hello, is this Northwind?", "greeting"),
            Turn("Hi, where is my order {id}?", "order_status", order="shipped"),
            Turn("And when will order {id} get here?", "delivery_date", order="same"),
            Turn("Okay, thanks. Bye.", "goodbye"),
        ),
        length_scale=1.0,
        pitch=1.0,
        level_db=-3,
    ),
    Call(
        "call02",
        (
            Turn("Do you have the {product} in stock?", "stock", product="in_stock"),
            Turn("Is the {product} in stock?", "stock", product="out_of_stock"),
            Turn("How much is shipping?", "shipping"),
            Turn("Great, thank you.", "thanks"),
        ),
        length_scale=1.15,
        pitch=0.94,
        level_db=-6,
        noise="pink",
        snr_db=25,
    ),
    Call(
        "call03",
        (
            Turn(
                "Hi, I'm calling about order {id}.", "order_status", order="processing", id_form="pair_words"
            ),
            Turn("Can I still cancel order {id}?", "cancel_order", order="same", id_form="pair_words"),
            Turn("Okay. Can I talk to a person, please?", "agent"),
        ),
        length_scale=0.95,
        pitch=1.05,
        level_db=-4,
        noise="hiss",
        snr_db=22,
        rate=8000,
        codec="ulaw",
        telephone=True,
    ),
    Call(
        "call04",
        (
            Turn("What time do you open on Saturday?", "hours"),
            Turn("And how long do I have to return something?", "return_policy"),
        ),
        length_scale=0.88,
        pitch=1.08,
        level_db=-8,
        noise="brown",
        snr_db=30,
    ),
    Call(
        "call05",
        (
            Turn("Good morning.", "greeting"),
            Turn("I'd like to return order {id}.", "return_refund", order="delivered"),
            Turn("How long does a refund take?", "return_policy"),
            Turn("Alright, that's all. Bye.", "goodbye"),
        ),
        length_scale=1.25,
        pitch=0.97,
        level_db=-2,
        rate=44100,
    ),
    Call(
        "call06",
        (
            Turn("Hello, can you check order {id}, please?", "order_status", order="out_for_delivery"),
            Turn("Can I change the address on order {id}?", "change_order", order="same"),
            Turn("Thanks for your help.", "thanks"),
        ),
        length_scale=1.05,
        pitch=1.02,
        level_db=-5,
        stereo=True,
    ),
    Call(
        "call07",
        (
            Turn("I need a {product}. Do you have it in stock?", "stock", product="in_stock"),
            Turn("Do you sell a {product}?", "stock", product="missing"),
            Turn("What's the price of the {product}?", "stock", product="in_stock"),
            Turn("Okay, bye.", "goodbye"),
        ),
        length_scale=0.92,
        pitch=0.92,
        level_db=-4,
        noise="babble",
        snr_db=32,
        rate=48000,
        codec="ogg",
    ),
    Call(
        "call08",
        (
            Turn("Where is my refund on order {id}?", "return_refund", order="returned"),
            Turn("When will order {id} arrive?", "delivery_date", order="shipped", id_form="words_oh"),
        ),
        length_scale=1.1,
        pitch=1.0,
        level_db=-3,
        noise="hum",
        snr_db=28,
        rate=22050,
        codec="mp3",
    ),
    Call(
        "call09",
        (
            Turn("Hi, I have a question.", "greeting"),
            Turn("Has my order {id} shipped yet?", "order_status", order="shipped"),
            Turn("When does order {id} arrive?", "delivery_date", order="same", id_form="pair_words"),
            Turn("I'd like to talk to a person.", "agent"),
            Turn("Thanks. Goodbye.", "goodbye"),
        ),
        length_scale=1.0,
        pitch=0.96,
        level_db=-6,
        noise="pink",
        snr_db=15,
    ),
    Call(
        "call10",
        (
            Turn("I want to cancel order {id}.", "cancel_order", order="cancelled"),
            Turn("Can I return order {id}?", "return_refund", order="delivered"),
        ),
        length_scale=0.85,
        pitch=1.1,
        level_db=-3,
    ),
    Call(
        "call11",
        (
            Turn("Do you have free shipping?", "shipping"),
            Turn("Is the {product} available right now?", "stock", product="out_of_stock"),
            Turn("Thank you so much.", "thanks"),
        ),
        length_scale=1.2,
        pitch=0.9,
        level_db=-5,
        noise="babble",
        snr_db=36,
    ),
    Call(
        "call12",
        (
            Turn(
                "Um, my order number is {id}. Can you tell me the status?", "order_status", order="delivered"
            ),
            Turn("Can I return order {id}?", "return_refund", order="same", id_form="pair_words"),
            Turn("And how long do refunds take?", "return_policy"),
            Turn("Okay, that's it. Bye.", "goodbye"),
        ),
        length_scale=1.0,
        pitch=1.04,
        level_db=-7,
        noise="brown",
        snr_db=20,
    ),
    Call(
        "call13",
        (
            Turn("Yes, hello. What's the status of order {id}?", "order_status", order="cancelled"),
            Turn("What are your hours?", "hours"),
            Turn("Bye bye.", "goodbye"),
        ),
        length_scale=1.12,
        pitch=1.06,
        level_db=-4,
        noise="hum",
        snr_db=35,
    ),
    Call(
        "call14",
        (
            Turn("I need to change the size on order {id}.", "change_order", order="processing"),
            Turn("Is there a way to cancel order {id}?", "cancel_order", order="same", id_form="words_oh"),
            Turn("Great, thanks a lot.", "thanks"),
        ),
        length_scale=0.9,
        pitch=0.95,
        level_db=-3,
        rate=22050,
        codec="wav",
    ),
]


# -- what each turn asks for: ids, products, the tool call and the facts of a right answer -------


@dataclass(frozen=True)
class Resolved:
    text: str  # reference transcript
    say: str  # what the voice reads
    intent: str
    tool: dict | None
    answer: str
    facts: list[str]


def resolve(calls: list[Call], store: Store) -> dict[str, list[Resolved]]:
    """Pick ids and products for every call in order (so one call alone comes out the same)."""
    rng = random.Random("ttfat-recordings")
    ids = {
        s: sorted(i for i, o in store.orders.items() if o["status"] == s and in_heldout_id(i))
        for s in STATUSES
    }
    heldout = split_items(sorted(store.products), "product", "heldout")
    products = {
        "in_stock": [p for p in heldout if store.products[p]["in_stock"] > 0],
        "out_of_stock": [p for p in heldout if store.products[p]["in_stock"] == 0],
        "missing": [
            p for p in split_items(NOT_CARRIED, "missing_product", "heldout") if store.find_product(p) is None
        ],
    }
    out: dict[str, list[Resolved]] = {}
    for call in calls:
        turns, oid = [], None
        for t in call.turns:
            slots, tool = {}, None
            if t.order:
                if t.order != "same":
                    oid = rng.choice(ids[t.order])
                    ids[t.order].remove(oid)
                slots["id"] = say_order_id(oid, t.id_form)
                tool = {"name": "lookup_order", "arguments": {"order_id": oid}}
                answer, facts = order_answer(t.intent, store.lookup_order(oid))
            elif t.product:
                name = rng.choice(products[t.product])
                products[t.product].remove(name)
                slots["product"] = name
                tool = {"name": "check_stock", "arguments": {"product": name}}
                answer, facts = stock_answer(store.check_stock(name))
            else:
                answer, facts = DIRECT_ANSWERS[t.intent]
                facts = list(facts) if t.intent in POLICY_INTENTS else []
            say = t.say.format(**slots)
            text = re.sub(r"[^a-z' ]", "", say.lower()).strip()
            turns.append(Resolved(text, say, t.intent, tool, answer, facts))
        out[call.name] = turns
    return out


# -- audio --------------------------------------------------------------------------------------


@functools.cache
def _voice(length_scale: float) -> Synthesizer:
    # the callers' voice as piper makes it, its lead of silence kept: the recordings were made so
    return Synthesizer(length_scale=length_scale, noise_scale=0.0, noise_w_scale=0.0, trim_lead=False)


@functools.cache
def _synth(text: str, length_scale: float) -> np.ndarray:
    return _voice(length_scale).speak(text).audio.astype(np.float64) / 32768


def speech(text: str, length_scale: float, pitch: float, rate: int) -> np.ndarray:
    """Synthesized speech at ``rate``; reading it as VOICE_RATE * pitch shifts pitch and formants."""
    return soxr.resample(_synth(text, length_scale), VOICE_RATE * pitch, rate)


def voiced(x: np.ndarray) -> tuple[int, int]:
    """First and one-past-last sample above THRESHOLD."""
    idx = np.flatnonzero(np.abs(x) > THRESHOLD)
    return int(idx[0]), int(idx[-1]) + 1


def audible(speech: np.ndarray, bg: np.ndarray, a: int, b: int, rate: int) -> tuple[int, int]:
    """Narrow a speech span [a, b) to the 10 ms windows where the speech is louder than the noise mixed
    under it: a faint release buried in the background is not in the recording for any detector, so
    under noise the boundaries are where the speech is audible (10 ms resolution)."""
    w = rate // 100
    loud = [i for i in range(a, b, w) if _rms(speech[i : i + w]) >= _rms(bg[i : i + w])]
    return (loud[0], min(b, loud[-1] + w)) if loud else (a, b)


def band_limit(x: np.ndarray, rate: int, lo: float = 300.0, hi: float = 3400.0) -> np.ndarray:
    """Telephone band: linear ramps from lo/1.5 up to lo and from hi up to hi * 1.1."""
    f = np.fft.rfftfreq(len(x), 1 / rate)
    gain = np.clip((f - lo / 1.5) / (lo - lo / 1.5), 0, 1) * np.clip((hi * 1.1 - f) / (hi * 0.1), 0, 1)
    return np.fft.irfft(np.fft.rfft(x) * gain, len(x))


def colored(n: int, rate: int, rng: np.random.Generator, exponent: float) -> np.ndarray:
    """Noise with power ~ 1/f**exponent (1: pink, 2: brown), nothing below 20 Hz."""
    f = np.fft.rfftfreq(n, 1 / rate)
    shape = np.where(f >= 20, np.maximum(f, 20) ** (-exponent / 2), 0)
    return np.fft.irfft(np.fft.rfft(rng.standard_normal(n)) * shape, n)


def hum(n: int, rate: int, rng: np.random.Generator) -> np.ndarray:
    """60 Hz mains hum with harmonics, over a little pink noise."""
    t = np.arange(n) / rate
    tones = sum(
        a * np.sin(2 * np.pi * 60 * k * t + rng.uniform(0, 2 * np.pi))
        for k, a in enumerate((1.0, 0.5, 0.35, 0.2, 0.1), 1)
    )
    pink = colored(n, rate, rng, 1.0)
    return tones / _rms(tones) + 0.3 * pink / _rms(pink)


def babble(n: int, rate: int, rng: np.random.Generator) -> np.ndarray:
    """Three other agents talking in the background (the store's own answers, other voices)."""
    lines = [text for text, _ in DIRECT_ANSWERS.values()]
    out = np.zeros(n)
    for pitch in (0.86, 1.0, 1.14):
        parts = []
        for i in rng.permutation(len(lines)):
            parts += [speech(lines[i], 1.0, pitch, rate), np.zeros(round(rng.uniform(0.1, 0.6) * rate))]
        stream = np.concatenate(parts)
        out += np.roll(np.resize(stream, n), int(rng.integers(n)))
    return out


def noise(kind: str, n: int, rate: int, rng: np.random.Generator) -> np.ndarray:
    """Background noise of a kind, at unit RMS."""
    x = {
        "pink": lambda: colored(n, rate, rng, 1.0),
        "brown": lambda: colored(n, rate, rng, 2.0),
        "hiss": lambda: rng.standard_normal(n),
        "hum": lambda: hum(n, rate, rng),
        "babble": lambda: babble(n, rate, rng),
    }[kind]()
    return x / _rms(x)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def render(call: Call, turns: list[Resolved]) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The call's audio (samples x channels, float in [-1, 1]) and each turn's speech span in samples."""
    rate, rng = call.rate, np.random.default_rng(zlib.crc32(call.name.encode()))
    peak = 10 ** (call.level_db / 20)
    clips = []
    for t in turns:
        x = speech(t.say, call.length_scale, call.pitch, rate)
        if call.telephone:
            x = band_limit(x, rate)
        clips.append(x * peak / np.abs(x).max())
    # The agent's side of a stereo call: its answers in another voice, 12 dB quieter, after each turn.
    answers = [speech(t.answer, 1.0, 0.88, rate) * peak / 4 for t in turns] if call.stereo else []

    spans, offsets, start = [], [], round(rng.uniform(*LEAD_S) * rate)
    for i, x in enumerate(clips):
        first, last = voiced(x)
        offsets.append(start - first)
        spans.append((start, start - first + last))
        gap = rng.uniform(*GAP_S)
        if answers:
            gap = max(gap, len(answers[i]) / rate + 1.5)
        start = spans[-1][1] + round(gap * rate)
    delay = round(ANSWER_DELAY_S * rate)
    last = [spans[-1][1] + delay + len(answers[-1])] if answers else []
    n = max(spans[-1][1] + round(TAIL_S * rate), offsets[-1] + len(clips[-1]), *last)

    caller = np.zeros(n)
    for off, x in zip(offsets, clips, strict=True):
        caller[off : off + len(x)] += x
    if call.noise:
        level = np.sqrt(np.mean(np.concatenate([np.square(caller[a:b]) for a, b in spans])))
        bg = noise(call.noise, n, rate, rng) * level / 10 ** (call.snr_db / 20)
        bg = band_limit(bg, rate) if call.telephone else bg
        spans = [audible(caller, bg, a, b, rate) for a, b in spans]
        caller += bg
    channels = [caller]
    if answers:
        agent = np.zeros(n)
        for (_, end), x in zip(spans, answers, strict=True):
            agent[end + delay : end + delay + len(x)] = x
        channels = [agent, caller]
    audio = np.stack(channels, axis=1)
    if np.abs(audio).max() >= 1:
        raise ValueError(f"{call.name} clips: lower level_db or raise snr_db")
    return audio, spans


def write(path: Path, audio: np.ndarray, rate: int, codec: str) -> None:
    _, fmt, subtype = CODECS[codec]
    data = audio if codec in ("ogg", "mp3") else np.round(audio * 32767).astype(np.int16)
    sf.write(path, data, rate, format=fmt, subtype=subtype)
    if codec == "ogg":
        fix_ogg_serial(path)


def _ogg_crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = (r << 1) ^ 0x04C11DB7 if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return table


_OGG_CRC = _ogg_crc_table()


def fix_ogg_serial(path: Path, serial: int = 1) -> None:
    """libsndfile gives every Ogg stream a random serial number: fix it (and each page's CRC) so that
    the same audio gives the same bytes."""
    data = bytearray(path.read_bytes())
    pos = 0
    while pos < len(data):
        if data[pos : pos + 4] != b"OggS":
            raise ValueError(f"{path}: not an Ogg page at byte {pos}")
        n_segments = data[pos + 26]
        end = pos + 27 + n_segments + sum(data[pos + 27 : pos + 27 + n_segments])
        data[pos + 14 : pos + 18] = serial.to_bytes(4, "little")
        data[pos + 22 : pos + 26] = bytes(4)
        crc = 0
        for byte in data[pos:end]:
            crc = ((crc << 8) & 0xFFFFFFFF) ^ _OGG_CRC[(crc >> 24) ^ byte]
        data[pos + 22 : pos + 26] = crc.to_bytes(4, "little")
        pos = end
    path.write_bytes(data)


def make(call: Call, turns: list[Resolved], out: Path, lossless: bool = False) -> dict:
    """Write one call into ``out`` and return its manifest entry."""
    codec = "flac" if lossless else call.codec
    file = f"{call.name}.{CODECS[codec][0]}"
    audio, spans = render(call, turns)
    write(out / file, audio, call.rate, codec)
    return {
        "call": call.name,
        "file": file,
        "codec": codec,
        "sample_rate": call.rate,
        "channels": audio.shape[1],
        "caller_channel": audio.shape[1] - 1,
        "duration_s": round(len(audio) / call.rate, 3),
        "voice": {"length_scale": call.length_scale, "pitch": call.pitch, "level_db": call.level_db},
        "noise": {"kind": call.noise, "snr_db": call.snr_db} if call.noise else None,
        "telephone_band": call.telephone,
        "turns": [
            {
                "turn": i,
                "text": t.text,
                "speech_start_s": round(a / call.rate, 3),
                "speech_end_s": round(b / call.rate, 3),
                "intent": t.intent,
                "expected_tool": t.tool,
                "facts": t.facts,
                "answer": t.answer,
            }
            for i, (t, (a, b)) in enumerate(zip(turns, spans, strict=True))
        ],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [c.name for c in CALLS]
    ap.add_argument("--only", action="append", choices=names, metavar="CALL", help="make only this call")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: recordings/)")
    ap.add_argument("--lossless", action="store_true", help="write FLAC whatever the call's codec")
    args = ap.parse_args(argv)

    resolved = resolve(CALLS, Store())
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = args.out / MANIFEST
    entries = {}
    if manifest.exists():  # --only keeps the other calls' entries
        entries = {e["call"]: e for e in map(json.loads, manifest.read_text().splitlines())}
    for call in CALLS:
        if not args.only or call.name in args.only:
            entries[call.name] = e = make(call, resolved[call.name], args.out, args.lossless)
            print(f"{e['file']}: {len(e['turns'])} turns, {e['duration_s']:.1f} s", file=sys.stderr)
    manifest.write_text("".join(json.dumps(entries[n]) + "\n" for n in names if n in entries))


if __name__ == "__main__":
    main()
