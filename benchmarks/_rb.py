import sys, contextlib  # noqa
from benchmarks import bench_queue as b
from benchmarks.engines import mysql_admin_url, mysql_scratch_database, server_name
from benchmarks.report import print_tables
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate
from tests.pg_server import postgres_server, scratch_database as pg_scratch
depth = int(sys.argv[1]); engines = sys.argv[2].split(",")
rows = []
for e in engines:
    with contextlib.ExitStack() as st:
        if e == "mysql":
            url = st.enter_context(mysql_scratch_database(mysql_admin_url(), prefix="jd_ratefix"))
        else:
            admin, _ = st.enter_context(postgres_server())
            url = st.enter_context(pg_scratch(admin, prefix="jd_ratefix"))
        with Database(parse_database_url(url)) as db:
            migrate(db); name = server_name(db)
        rows += b.rate_latency(name, url, depth)
print_tables({"rate latency": rows})
