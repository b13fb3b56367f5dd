"""The bundled store: a deterministic SQLite database built from the catalogue (`data/catalog.toml`), and
the two lookups its tools run (`llm/support/tools.py` gives them to the agent).

``build_database(path, seed)`` writes the database (``data/store.sqlite`` is the committed copy,
regenerate it with ``python -m llm.support.store``). ``Store`` answers the two tools with compact results
whose values are already speakable, so a tiny model only has to copy them into its answer.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import random
import sqlite3
from pathlib import Path

from llm.support.datafiles import DATA, load
from llm.support.policy import FREE_SHIPPING_OVER_CENTS, SHIPPING_FEE_CENTS
from llm.support.search import ProductSearch, order_id_of
from llm.support.spoken import money, number, spoken_date

TODAY = _dt.date(2026, 12, 1)
DEFAULT_DB = DATA / "store.sqlite"

STATUSES = ("processing", "shipped", "out_for_delivery", "delivered", "cancelled", "returned")
CARRIERS = ("UPS", "FedEx", "USPS", "DHL")
SHIP_LEAD_DAYS = 3  # a processing order ships this many days before its eta

N_ORDERS = 720

_CATALOG = load("catalog.toml")
PRODUCTS: list[str] = _CATALOG["products"]
BIG_TICKET = set(_CATALOG["big_ticket"])
_PRICE_TIERS: dict[str, list[int]] = _CATALOG["price_tiers"]
NOT_CARRIED: list[str] = _CATALOG["not_carried"]  # what callers ask for that the store has not


def _stable_rng(seed: int, tag: str) -> random.Random:
    return random.Random(f"{tag}:{seed}")


def build_database(path: str | Path, seed: int = 0) -> Path:
    """Write a fresh, deterministic store database to ``path`` (overwritten) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    rng = _stable_rng(seed, "store")

    products = []
    for name in PRODUCTS:
        tier = _PRICE_TIERS["big" if name in BIG_TICKET else "small"]
        price = rng.choice(tier) + rng.choice([0, 0, 0, -100, 100, 500])
        if rng.random() < 0.25:
            in_stock, restock = 0, (TODAY + _dt.timedelta(days=rng.randint(2, 45))).isoformat()
        else:
            in_stock, restock = rng.randint(1, 60), None
        sku = "NW-" + "".join(w[:3].upper() for w in name.split())
        products.append((sku, name, in_stock, price, restock))
    # Make SKUs unique deterministically.
    seen: dict[str, int] = {}
    for i, p in enumerate(products):
        k = seen.get(p[0], 0)
        seen[p[0]] = k + 1
        if k:
            products[i] = (f"{p[0]}{k}",) + p[1:]

    first, last = _CATALOG["customers"]["first"], _CATALOG["customers"]["last"]
    ids = rng.sample(range(1000, 10000), N_ORDERS)
    status_weights = [
        ("processing", 15),
        ("shipped", 22),
        ("out_for_delivery", 10),
        ("delivered", 33),
        ("cancelled", 10),
        ("returned", 10),
    ]
    statuses = [s for s, _ in status_weights]
    weights = [w for _, w in status_weights]
    orders = []
    for oid in ids:
        status = rng.choices(statuses, weights)[0]
        carrier = rng.choice(CARRIERS)
        eta = delivered = None
        if status == "processing":
            eta = TODAY + _dt.timedelta(days=rng.randint(SHIP_LEAD_DAYS + 1, 38))
        elif status == "shipped":
            eta = TODAY + _dt.timedelta(days=rng.randint(1, 12))
        elif status == "out_for_delivery":
            eta = TODAY
        elif status in ("delivered", "returned"):
            delivered = TODAY - _dt.timedelta(days=rng.randint(1, 28))
        n_items = rng.choice([1, 1, 1, 2, 2, 3])
        picked = rng.sample(products, n_items)
        items = ", ".join(p[1] for p in picked)
        total = sum(p[3] for p in picked)
        if total < FREE_SHIPPING_OVER_CENTS:
            total += SHIPPING_FEE_CENTS
        orders.append(
            (
                f"{oid:04d}",
                f"{rng.choice(first)} {rng.choice(last)}",
                status,
                None if status == "processing" else carrier,
                eta.isoformat() if eta else None,
                delivered.isoformat() if delivered else None,
                items,
                total,
            )
        )
    orders.sort()

    con = sqlite3.connect(path)
    try:
        con.executescript(
            """
            CREATE TABLE orders (
                order_id TEXT PRIMARY KEY,
                customer_name TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('processing', 'shipped', 'out_for_delivery',
                                                       'delivered', 'cancelled', 'returned')),
                carrier TEXT,
                eta_date TEXT,
                delivered_date TEXT,
                items TEXT NOT NULL,
                total_cents INTEGER NOT NULL
            );
            CREATE TABLE products (
                sku TEXT PRIMARY KEY,
                name TEXT NOT NULL UNIQUE,
                in_stock INTEGER NOT NULL,
                price_cents INTEGER NOT NULL,
                restock_date TEXT
            );
            """
        )
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)", orders)
        con.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?)", sorted(products, key=lambda p: p[1]))
        con.commit()
    finally:
        con.close()
    return path


def dump(path: str | Path) -> str:
    """SQL text dump of a database (to compare two builds)."""
    con = sqlite3.connect(path)
    try:
        return "\n".join(con.iterdump())
    finally:
        con.close()


def order_result(order_id: str, row: dict) -> dict:
    """What ``lookup_order`` says about an orders row: only the facts its status makes relevant, spoken."""
    res: dict = {"found": True, "order_id": order_id, "status": row["status"]}
    st = row["status"]
    if st in ("shipped", "out_for_delivery"):
        res["carrier"] = row["carrier"]
        res["eta"] = spoken_date(row["eta_date"])
    elif st == "delivered":
        res["delivered"] = spoken_date(row["delivered_date"])
    elif st == "processing":
        ships = _dt.date.fromisoformat(row["eta_date"]) - _dt.timedelta(days=SHIP_LEAD_DAYS)
        res["ships"] = spoken_date(ships)
    elif st in ("cancelled", "returned"):
        res["refund"] = money(row["total_cents"])
    return res


def stock_result(name: str, row: dict) -> dict:
    """What ``check_stock`` says about a products row."""
    res = {
        "found": True,
        "product": name,
        "in_stock": row["in_stock"],
        "in_stock_words": number(row["in_stock"]),
        "price": money(row["price_cents"]),
    }
    if row["in_stock"] == 0:
        res["restock"] = spoken_date(row["restock_date"])
    return res


class Store:
    """Read-only access to a store database, with the two tools the agent can call."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else DEFAULT_DB
        if not self.path.exists():
            raise FileNotFoundError(
                f"store database not found: {self.path} (run python -m llm.support.store)"
            )
        con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            con.row_factory = sqlite3.Row
            rows = con.execute("SELECT * FROM orders ORDER BY order_id")
            self.orders = {r["order_id"]: dict(r) for r in rows}
            rows = con.execute("SELECT * FROM products ORDER BY name")
            self.products = {r["name"]: dict(r) for r in rows}
        finally:
            con.close()
        self.search = ProductSearch(list(self.products))

    # -- tools ---------------------------------------------------------------------------------

    def lookup_order(self, order_id: str) -> dict:
        """An order by what the model wrote for its number: "4217", "#4217", "order 4217", "4,217",
        "04217", "four two one seven", "forty two seventeen", "four thousand two hundred seventeen"."""
        oid = order_id_of(str(order_id))
        if oid is None or oid not in self.orders:
            return {"found": False, "order_id": oid if oid is not None else str(order_id).strip()}
        return order_result(oid, self.orders[oid])

    def find_product(self, product: str) -> str | None:
        """The catalogue's name for a product as callers and the model say it (``ProductSearch``)."""
        return self.search.find(product)

    def check_stock(self, product: str) -> dict:
        name = self.find_product(product)
        if name is None:
            return {"found": False, "product": str(product)}
        return stock_result(name, self.products[name])

    def execute(self, name: str, arguments: dict | str) -> dict:
        """Run a tool by name; never raises (errors come back as ``{"error": ...}``)."""
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except (json.JSONDecodeError, TypeError):
            return {"error": "arguments are not valid JSON"}
        if not isinstance(args, dict):
            return {"error": "arguments must be a JSON object"}
        try:
            if name == "lookup_order":
                if not isinstance(args.get("order_id"), (str, int)) or isinstance(args.get("order_id"), bool):
                    return {"error": "lookup_order needs order_id"}
                return self.lookup_order(str(args["order_id"]))
            if name == "check_stock":
                if not isinstance(args.get("product"), str) or not args["product"].strip():
                    return {"error": "check_stock needs product"}
                return self.check_stock(args["product"])
        except Exception as exc:  # noqa: BLE001 - a tool must never crash the agent
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"error": f"unknown tool: {name}"}


def order_id_argument(arguments: dict | str) -> str | None:
    """The order_id of a lookup_order call's arguments, or None when they do not parse."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        return None
    value = args.get("order_id") if isinstance(args, dict) else None
    return None if value is None else str(value)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Regenerate the bundled store database.")
    ap.add_argument("--out", default=str(DEFAULT_DB))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    path = build_database(args.out, seed=args.seed)
    s = Store(path)
    print(f"wrote {path}: {len(s.orders)} orders, {len(s.products)} products")


if __name__ == "__main__":
    main()
