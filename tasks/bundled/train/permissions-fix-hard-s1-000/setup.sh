#!/usr/bin/env bash
set -euo pipefail
mkdir -p site/bin site/secrets site/public site site/data site/data/readonly
cat > site/bin/harbor.sh <<'T1_EOF'
#!/bin/sh
echo willow
T1_EOF
cat > site/bin/fjord.sh <<'T1_EOF'
#!/bin/sh
echo thistle
T1_EOF
cat > site/bin/lantern.sh <<'T1_EOF'
#!/bin/sh
echo basalt
T1_EOF
cat > site/secrets/bridge.key <<'T1_EOF'
key-652200
T1_EOF
cat > site/secrets/canyon.key <<'T1_EOF'
key-157595
T1_EOF
cat > site/secrets/beacon.key <<'T1_EOF'
key-258046
T1_EOF
cat > site/public/signal.css <<'T1_EOF'
river covers hazel
PRIVATE
T1_EOF
cat > site/public/marble.html <<'T1_EOF'
ribbon covers marble
T1_EOF
cat > site/README.txt <<'T1_EOF'
river writes quartz
# PRIVATE NOTES FOLLOW
T1_EOF
cat > site/data/feather.csv <<'T1_EOF'
id,value
1,43
PRIVATE
T1_EOF
cat > site/data/readonly/garden.csv <<'T1_EOF'
id
49
T1_EOF
cat > site/data/readonly/crystal.csv <<'T1_EOF'
id
9
T1_EOF
chmod 777 site/bin/harbor.sh
chmod 666 site/bin/fjord.sh
chmod 777 site/bin/lantern.sh
chmod 666 site/secrets/bridge.key
chmod 777 site/secrets/canyon.key
chmod 666 site/secrets/beacon.key
chmod 777 site/public/signal.css
chmod 664 site/public/marble.html
chmod 664 site/README.txt
chmod 777 site/data/feather.csv
chmod 777 site/data/readonly/garden.csv
chmod 666 site/data/readonly/crystal.csv
mkdir -p site/tmp
find site -type d -exec chmod 777 {} +
