"""The example agent's booking tool (see rooms.toml): a Python backend is any function of the call's
arguments (and, if it takes a second parameter, the conversation so far)."""


def book(arguments: dict) -> dict:
    room, minutes = str(arguments["room"]).strip().title(), int(arguments["minutes"])
    if room not in ("Blue", "Red"):
        return {"booked": False, "reason": f"there is no room called {room}"}
    if not 0 < minutes <= 240:
        return {"booked": False, "reason": "a booking is 1 to 240 minutes"}
    return {"booked": True, "room": room, "minutes": minutes}
