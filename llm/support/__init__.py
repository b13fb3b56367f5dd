"""The bundled support line of the Northwind store: its policy, database and tools, the data the bundled
models are trained on, their training and evaluation, and the models themselves (`weights/`)."""
