#!/usr/bin/env bash
set -euo pipefail
mkdir -p site/bin site/secrets site/public site site/data site/data/readonly
cat > site/bin/willow.sh <<'T1_EOF'
#!/bin/sh
echo island
T1_EOF
cat > site/bin/beacon.sh <<'T1_EOF'
#!/bin/sh
echo falcon
T1_EOF
cat > site/secrets/basalt.key <<'T1_EOF'
key-847621
T1_EOF
cat > site/secrets/copper.key <<'T1_EOF'
key-310062
T1_EOF
cat > site/public/pillar.html <<'T1_EOF'
badger keeps ribbon
T1_EOF
cat > site/public/nectar.html <<'T1_EOF'
cipher checks falcon
T1_EOF
cat > site/README.txt <<'T1_EOF'
beacon draws maple
T1_EOF
cat > site/data/saddle.csv <<'T1_EOF'
id,value
1,52
T1_EOF
cat > site/data/readonly/feather.csv <<'T1_EOF'
id
20
T1_EOF
cat > site/data/readonly/velvet.csv <<'T1_EOF'
id
38
T1_EOF
chmod 664 site/bin/willow.sh
chmod 664 site/bin/beacon.sh
chmod 777 site/secrets/basalt.key
chmod 777 site/secrets/copper.key
chmod 666 site/public/pillar.html
chmod 666 site/public/nectar.html
chmod 666 site/README.txt
chmod 666 site/data/saddle.csv
chmod 664 site/data/readonly/feather.csv
chmod 664 site/data/readonly/velvet.csv
find site -type d -exec chmod 777 {} +
