#!/bin/sh
# Temporal's schema on PostgreSQL with the server's own SQL tool (temporalio/admin-tools image).
# Runs before the server on every `docker compose up`: setup-schema -v 0.0 and update-schema are
# idempotent, so a restart applies only what a newer server version added. The two databases are
# created by deploy/postgres-init.sql when the volume is first initialised.
set -eu
# The password comes from SQL_PASSWORD (read by the tool), never from the command line.
for db in temporal:temporal visibility:temporal_visibility; do
  dir=${db%%:*}
  name=${db#*:}
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" --db "$name" setup-schema -v 0.0
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" --db "$name" \
    update-schema -d "/etc/temporal/schema/postgresql/v12/$dir/versioned"
done
