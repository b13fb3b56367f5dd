"""The `ttfat` command and its wiring: the one package that knows the voice pipeline (`voice/`), the LLM
(`llm/`), ASR (`asr/`) and TTS (`tts/`) together. `cli.py` parses the command line, `commands/` holds
one module per subcommand, `stack.py` builds what a run needs (the LLM server, the agent, ASR, TTS and
the environment a report carries), `decoding.py` the decoding flags."""
