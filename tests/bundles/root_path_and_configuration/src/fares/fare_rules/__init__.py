"""Fare rules shared by the pipeline's transformations (imported from the pipeline's root_path)."""

from pyspark.sql import Column
from pyspark.sql.functions import col, round


def fare_with_tip(fare: Column, tip_rate: float = 0.2) -> Column:
    """The fare with a standard tip added, to the cent."""
    return round(fare * (1 + tip_rate), 2)


def at_least(minimum: float) -> Column:
    """Trips whose fare is at least `minimum`."""
    return col("fare_amount") >= minimum
