"""The shop's data: one embedded SQLite database per backend service, and the query each RPC runs.

As in E-Shopper, where each microservice owns its database, the account, cart, categories,
items and recommendation services each read their own SQLite file. The recommendation service
owns a copy of the items it recommends: the best-rated :data:`N_RECOMMENDED` items of each
sub-category, ranked, taken from the same generated catalogue as the items service's ``items``
table. :func:`create_databases` builds the files once, deterministically from the seed, before
the services start (so that no start-up write is traced); the services open them read-only
after the sqlite3 instrumentation is installed, so every query is a span (kind client,
``db.system=sqlite``) under the RPC's server span.

Databases are keyed by **live** service and :data:`QUERIES` by **live** RPC
(:data:`._protocol.LIVE_SERVICE`: ``recommendation-service:getrecommended``, not the
simulator's ``items-service:getrecommended``): this module describes the live shop's data, and
a query's key names the service whose database answers it.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

#: Rows of each table.
N_USERS = 2000
N_ITEMS = 4000
N_TOP_CATEGORIES = 6
N_SUB_CATEGORIES = 5
N_BRANDS = 24
#: Items the recommendation service keeps per sub-category (the carousel shows 3 per slide).
N_RECOMMENDED = 12

_WORDS = ("classic", "slim", "cotton", "linen", "summer", "winter", "denim", "silk", "wool", "sport",
          "casual", "formal", "vintage", "urban", "basic", "premium")
_NOUNS = ("shirt", "dress", "jacket", "jeans", "skirt", "sweater", "coat", "shoes", "hat", "bag", "scarf",
          "belt")

_SCHEMAS = {
    "account-service": """
        CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT, currency TEXT, tier TEXT,
                            favourite_category INTEGER);
    """,
    "cart-service": """
        CREATE TABLE cart_lines (user_id INTEGER, item_id INTEGER, quantity INTEGER, price_cents INTEGER);
        CREATE INDEX cart_lines_user ON cart_lines (user_id);
    """,
    "categories-service": """
        CREATE TABLE categories (id INTEGER PRIMARY KEY, parent_id INTEGER, name TEXT, position INTEGER);
        CREATE INDEX categories_parent ON categories (parent_id, position);
        CREATE TABLE brands (id INTEGER PRIMARY KEY, name TEXT, n_items INTEGER);
    """,
    "items-service": """
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, category_id INTEGER, brand_id INTEGER,
                            price_cents INTEGER, featured INTEGER, rating REAL);
        CREATE INDEX items_category ON items (category_id, rating);
        CREATE INDEX items_featured ON items (featured, rating);
    """,
    "recommendation-service": """
        CREATE TABLE recommendations (category_id INTEGER, position INTEGER, item_id INTEGER, name TEXT,
                                      price_cents INTEGER, rating REAL, PRIMARY KEY (category_id, position));
    """,
}

#: The query each RPC runs, keyed by live RPC (``?`` parameters from :func:`query_parameters`).
QUERIES = {
    "account-service:getprofile":
        "SELECT id, name, email, currency, tier, favourite_category FROM users WHERE id = ?",
    "cart-service:getcart":
        "SELECT item_id, quantity, price_cents FROM cart_lines WHERE user_id = ?",
    "categories-service:getcategory":
        "SELECT id, name FROM categories WHERE parent_id = ? ORDER BY position",
    "categories-service:getbrands":
        "SELECT name, n_items FROM brands ORDER BY n_items DESC, name LIMIT 12",
    "items-service:finditems":
        "SELECT id, name, price_cents, rating FROM items WHERE category_id = ? ORDER BY rating DESC LIMIT 9",
    "items-service:findfeaturesitems":
        "SELECT id, name, price_cents, rating FROM items WHERE featured = 1 ORDER BY rating DESC LIMIT 6",
    "recommendation-service:getrecommended":
        "SELECT item_id, name, price_cents, rating FROM recommendations WHERE category_id = ? ORDER BY position "
        "LIMIT 3 OFFSET ?",
}
#: Live services with a database.
DATABASE_SERVICES = tuple(_SCHEMAS)


def _top_category(user: int) -> int:
    return 1 + user % N_TOP_CATEGORIES


def _sub_category(top: int, k: int) -> int:
    return N_TOP_CATEGORIES + 1 + (top - 1) * N_SUB_CATEGORIES + k % N_SUB_CATEGORIES


def query_parameters(rpc: str, *, user: int, rank: int) -> tuple:
    """Parameters of :data:`QUERIES` ``[rpc]`` (a live RPC) for a request of ``user``, at ``rank`` among its
    parent's calls of the RPC (panel 0 is the top-level categories, panels 1-3 sub-categories;
    slide ``rank`` of the carousel)."""
    if rpc == "account-service:getprofile":
        return (1 + user % N_USERS,)
    if rpc == "cart-service:getcart":
        return (1 + user % N_USERS,)
    if rpc == "categories-service:getcategory":
        return (0 if rank == 0 else (rank - 1) % N_TOP_CATEGORIES + 1,)
    if rpc == "items-service:finditems":
        return (_sub_category(_top_category(user), user // N_TOP_CATEGORIES),)
    if rpc == "recommendation-service:getrecommended":
        return (_sub_category(_top_category(user), rank), 3 * rank)
    return ()


def create_databases(directory, *, seed: int = 0) -> dict[str, str]:
    """Build each backend service's SQLite file in ``directory``, deterministically from ``seed``.

    Returns
    -------
    dict of str to str
        ``{live service: database path}``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    n_categories = N_TOP_CATEGORIES * (1 + N_SUB_CATEGORIES)
    rows = {
        "users": [(u, f"user{u}", f"user{u}@example.com", rng.choice(("EUR", "USD", "GBP")),
                   rng.choice(("basic", "silver", "gold")), 1 + rng.randrange(N_TOP_CATEGORIES))
                  for u in range(1, N_USERS + 1)],
        "cart_lines": [(u, 1 + rng.randrange(N_ITEMS), 1 + rng.randrange(3), rng.randrange(500, 20000))
                       for u in range(1, N_USERS + 1) for _ in range(rng.randrange(0, 6))],
        "categories": [(t, 0, f"category {t}", t) for t in range(1, N_TOP_CATEGORIES + 1)]
                      + [(_sub_category(t, k), t, f"category {t}.{k}", k)
                         for t in range(1, N_TOP_CATEGORIES + 1) for k in range(N_SUB_CATEGORIES)],
        "brands": [(b, f"brand {b}", rng.randrange(10, 400)) for b in range(1, N_BRANDS + 1)],
        "items": [(i, f"{rng.choice(_WORDS)} {rng.choice(_NOUNS)}", N_TOP_CATEGORIES + 1 + rng.randrange(
            n_categories - N_TOP_CATEGORIES), 1 + rng.randrange(N_BRANDS), rng.randrange(500, 20000),
                   int(rng.random() < 0.05), round(rng.uniform(1, 5), 2)) for i in range(1, N_ITEMS + 1)],
    }
    by_category: dict[int, list[tuple]] = {}
    for item in rows["items"]:
        by_category.setdefault(item[2], []).append(item)
    rows["recommendations"] = [
        (category, position, i, name, price, rating)
        for category, items in sorted(by_category.items())
        for position, (i, name, _, _, price, _, rating) in enumerate(
            sorted(items, key=lambda it: (-it[6], it[0]))[:N_RECOMMENDED])]
    tables = {"account-service": ("users",), "cart-service": ("cart_lines",),
              "categories-service": ("categories", "brands"), "items-service": ("items",),
              "recommendation-service": ("recommendations",)}
    paths = {}
    for service, schema in _SCHEMAS.items():
        path = directory / f"{service}.sqlite"
        path.unlink(missing_ok=True)
        con = sqlite3.connect(path)
        try:
            con.executescript(schema)
            for table in tables[service]:
                data = rows[table]
                con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(data[0]))})", data)
            con.commit()
        finally:
            con.close()
        paths[service] = str(path)
    return paths
