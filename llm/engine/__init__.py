"""The inference engine: diffusion (and autoregressive) transformers from a local checkpoint, decoded
with batching and committed-prefix streaming. It knows nothing of HTTP, agents or any domain."""
