"""One row per reported case (month, county, died) from the monthly counts: the unit table of the
seed-2 case study specs. Deterministic: rows ordered by month and county, deaths first."""

import os

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    monthly = pd.read_csv(os.path.join(HERE, "pa_covid_monthly_2020.csv"))
    reps = monthly["cases"].to_numpy()
    rows = monthly.loc[monthly.index.repeat(reps), ["month", "county"]].reset_index(drop=True)
    start = np.repeat(np.cumsum(reps) - reps, reps)
    rank = np.arange(len(rows)) - start
    rows["died"] = rank < np.repeat(monthly["deaths"].to_numpy(), reps)
    rows.to_parquet(os.path.join(HERE, "cases.parquet"), index=False)


if __name__ == "__main__":
    main()
