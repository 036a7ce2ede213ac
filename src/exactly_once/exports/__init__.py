"""Reference tables that arrive as daily export files rather than through Kafka.

    files.py    `<name>_<YYYY-MM-DD>.csv` in a directory: listing, the next export after a
                date, reading one with its declared schema (what the pipeline imports)
    players.py  a synthetic daily `players` export: players join, leave, change tier or country,
                rename themselves (`exactly-once export-players`, the sample data, the tests)
"""
