#!/usr/bin/env bash
set -euo pipefail
cat > corpus.txt <<'T1_EOF'
coral To anchor is: pillar
Ribbon The to young the
in noble ribbon timber ember the in pebble
To the to? plain ribbon in is.
coral pillar the Ribbon Young the kernel, mellow anchor Copper the:
ribbon Pillar the pebble eager the
the basalt! pillar is! pillar coral is the timber;
in is to tidy quiet, ribbon pebble anchor is
is! pebble? young; Anchor is is pillar?
pillar young young is Timber, to Coral delta To
anchor Coral. Pillar. calm Young Coral
the the in to Timber the. Delta is basalt To to
anchor coral the pillar; coral
anchor timber Is, in to young in Coral in is To
Young is Timber timber is young in in in
Is is witty! is In: the
ribbon steady. coral basalt in in coral Coral maple in
pillar ribbon basalt Anchor ember Is
river in: to to In Delta pillar to anchor.
To the is is pillar; anchor ribbon the young
the? in In timber is pillar Timber in in! to
pillar timber ribbon Ribbon! the is is is
Pebble; anchor delta ribbon Is Pillar is? Anchor delta is Coral
Is coral anchor the to: basalt anchor delta Anchor
to delta is To Kernel pebble
coral coral to in delta Ember in timber
the in raven pebble Ribbon; In coral: in? to
T1_EOF
cat > stopwords.txt <<'T1_EOF'
the
in
to
is
T1_EOF
