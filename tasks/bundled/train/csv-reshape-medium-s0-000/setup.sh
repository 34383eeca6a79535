#!/usr/bin/env bash
set -euo pipefail
cat > people.csv <<'T1_EOF'
start_date,email,id,last_name,department,salary,first_name
2020-11-26,omar.walsh@corp.example,246,walsh,engineering,164500,omar
2018-03-12,alan.patel@corp.example,261,patel,sales,168000,alan
2020-05-13,diego.quigley@corp.example,201,quigley,sales,94500,diego
2010-09-17,amara.ellis@corp.example,177,ellis,engineering,61500,amara
2022-11-11,bruno.ellis@corp.example,184,ellis,sales,78000,bruno
2010-05-13,yara.kowalski@corp.example,252,kowalski,engineering,79500,yara
2024-08-04,leo.castro@corp.example,216,castro,research,103000,leo
2015-06-15,hana.nakamura@corp.example,221,nakamura,research,113500,hana
2019-12-13,rosa.ito@corp.example,194,ito,sales,84000,rosa
2019-04-24,zoe.kowalski@corp.example,237,kowalski,research,139000,zoe
2021-09-27,chen.walsh@corp.example,157,walsh,research,170000,chen
2017-06-12,emil.patel@corp.example,170,patel,research,179000,emil
2020-09-26,hana.ellis@corp.example,236,ellis,sales,173500,hana
2014-07-14,ivan.okafor@corp.example,229,okafor,engineering,175000,ivan
2020-09-12,jonas.okafor@corp.example,262,okafor,research,134500,jonas
2011-01-06,ada.rossi@corp.example,152,rossi,research,72500,ada
2014-03-19,elena.fischer@corp.example,193,fischer,engineering,114000,elena
2012-05-04,ada.baker@corp.example,235,baker,engineering,149000,ada
2013-06-09,wen.nakamura@corp.example,210,nakamura,research,111500,wen
2021-02-03,jonas.abbott@corp.example,164,abbott,research,176000,jonas
T1_EOF
