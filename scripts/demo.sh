#!/usr/bin/env bash
# A local HA demo: VictoriaLogs (a Loki-compatible log store) and two sf2loki
# replicas sharing a lease file and a checkpoint file under ./.demo/, with the
# synthetic source. Ctrl-C stops everything this script started.
# DEMO_SECONDS=N stops it after N seconds (the tests run it that way);
# DEMO_DIR moves its files.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=${DEMO_DIR:-.demo}
LOGS_ADDR=127.0.0.1:9428
A_ADDR=127.0.0.1:8081
B_ADDR=127.0.0.1:8082

mkdir -p "$DEMO"
cat > "$DEMO/sf2loki.yaml" <<YAML
coordinate:
  type: file_lease
  file_lease: {path: leader.lease, ttl: 6s, renew_interval: 2s}
state:
  file: {path: state.json}
sources:
  synthetic: {rate: 20}
sink:
  loki: {url: http://$LOGS_ADDR/insert/loki/api/v1/push, labels: {job: sf2loki}}
service:
  log_format: text
YAML

pids=()
cleanup() {
  trap - INT TERM EXIT
  echo
  echo "stopping: ${pids[*]:-}"
  for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

./.bin/victoria-logs -storageDataPath="$DEMO/victoria-logs" -httpListenAddr="$LOGS_ADDR" \
  -retentionPeriod=100y -futureRetention=100y -loki.disableMessageParsing -loggerLevel=ERROR \
  > "$DEMO/victoria-logs.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -fsS "http://$LOGS_ADDR/health" >/dev/null 2>&1 && break; sleep 0.1; done

SF2LOKI_SERVICE__HEALTH_ADDR=$A_ADDR SF2LOKI_COORDINATE__FILE_LEASE__HOLDER_ID=replica-a \
  ./bin/sf2loki run --config "$DEMO/sf2loki.yaml" > "$DEMO/replica-a.log" 2>&1 &
pids+=($!)
SF2LOKI_SERVICE__HEALTH_ADDR=$B_ADDR SF2LOKI_COORDINATE__FILE_LEASE__HOLDER_ID=replica-b \
  ./bin/sf2loki run --config "$DEMO/sf2loki.yaml" > "$DEMO/replica-b.log" 2>&1 &
pids+=($!)
sleep 2
# The leader is the replica whose /readyz starts with "leader" (waiting up to 10s more).
LEADER_ADDR=$A_ADDR LEADER=replica-a
for _ in $(seq 1 100); do
  if [[ $(curl -s "http://$A_ADDR/readyz" || true) == leader* ]]; then LEADER_ADDR=$A_ADDR LEADER=replica-a; break; fi
  if [[ $(curl -s "http://$B_ADDR/readyz" || true) == leader* ]]; then LEADER_ADDR=$B_ADDR LEADER=replica-b; break; fi
  sleep 0.1
done

cat <<EOT
sf2loki demo running (logs in $DEMO/):
  VictoriaLogs      http://$LOGS_ADDR   (pid ${pids[0]})
  replica-a         http://$A_ADDR      (pid ${pids[1]})  /readyz: $(curl -s "http://$A_ADDR/readyz" || true)
  replica-b         http://$B_ADDR      (pid ${pids[2]})  /readyz: $(curl -s "http://$B_ADDR/readyz" || true)

Watch the leader:   curl -s $A_ADDR/readyz $B_ADDR/readyz; curl -s $A_ADDR/statusz
Metrics:            curl -s $LEADER_ADDR/metrics | grep ^sf2loki_   (the leader, $LEADER)
Query the logs:     curl -s 'http://$LOGS_ADDR/select/logsql/query?query=%7Bsource%3D%22synthetic%22%7D%20%7C%20limit%205'
Checkpoints:        ./bin/sf2loki state --config $DEMO/sf2loki.yaml show
Fail over:          kill -9 <the leader's pid>   (the standby's /readyz turns to "leader" within ~8s)
Ctrl-C stops everything.
EOT
if [ -n "${DEMO_SECONDS:-}" ]; then
  sleep "$DEMO_SECONDS"
  echo "after ${DEMO_SECONDS}s: replica-a $(curl -s "http://$A_ADDR/readyz" || true), replica-b $(curl -s "http://$B_ADDR/readyz" || true)"
  echo "checkpoints:"
  ./bin/sf2loki state --config "$DEMO/sf2loki.yaml" show
  exit 0
fi
wait
