#!/usr/bin/env bash
set -euo pipefail
cat > people.csv <<'T1_EOF'
last_name;salary;department;email;first_name;start_date;id
rossi;146000;legal;YARA.ROSSI@CORP.EXAMPLE;yara;2010-11-15;252
young;143000;finance;umar.young@corp.example;umar;2013-07-01;365
ellis;49500;sales;IVAN.ELLIS@CORP.EXAMPLE;ivan;2022-03-28;295
dalton;163500;legal;AMARA.DALTON@CORP.EXAMPLE;amara;2022-11-14;347
garcia;158000;legal;kai.garcia@corp.example;kai;2015-12-26;241
hughes;68000;finance;farah.hughes@corp.example;farah;2011-12-05;290
abbott;64500;sales;WEN.ABBOTT@CORP.EXAMPLE;wen;2010-02-20;332
tanaka;116000;legal;alan.tanaka@corp.example;alan;2014-06-06;326
nakamura;104000;legal;EMIL.NAKAMURA@CORP.EXAMPLE;emil;2022-09-25;311
abbott;112000;sales;hana.abbott@corp.example;hana;2024-08-25;317
kowalski;61000;legal;GRACE.KOWALSKI@CORP.EXAMPLE;grace;2015-09-05;376
okafor;171500;finance;CHEN.OKAFOR@CORP.EXAMPLE;chen;2015-05-16;343
rossi;58000;sales;alan.rossi@corp.example;alan;2021-11-23;309
young;134000;legal;GRACE.YOUNG@CORP.EXAMPLE;grace;2013-07-01;361
zimmer;65000;legal;LENA.ZIMMER@CORP.EXAMPLE;lena;2023-01-22;371
quigley;130500;sales;OMAR.QUIGLEY@CORP.EXAMPLE;omar;2022-08-01;286
ito;121000;sales;yara.ito@corp.example;yara;2024-05-15;368
young;159500;finance;KAI.YOUNG@CORP.EXAMPLE;kai;2016-01-20;261
morgan;145000;finance;tara.morgan@corp.example;tara;2011-03-24;335
dalton;128500;sales;carla.dalton@corp.example;carla;2022-05-06;272
xu;79000;legal;elena.xu@corp.example;elena;2019-10-03;325
santos;93500;finance;bruno.santos@corp.example;bruno;2017-08-16;294
castro;148000;sales;amara.castro@corp.example;amara;2014-07-09;260
rossi;118500;legal;kai.rossi@corp.example;kai;2018-10-21;303
varga;80000;sales;LEO.VARGA@CORP.EXAMPLE;leo;2017-03-18;353
abbott;64500;sales;WEN.ABBOTT@CORP.EXAMPLE;wen;2010-02-20;332
walsh;152500;legal;priya.walsh@corp.example;priya;2023-11-10;245
xu;136500;legal;maya.xu@corp.example;maya;2018-07-01;238
young;174000;sales;alice.young@corp.example;alice;2013-11-05;267
dalton;178500;finance;maya.dalton@corp.example;maya;2024-12-11;378
zimmer;65000;legal;LENA.ZIMMER@CORP.EXAMPLE;lena;2023-01-22;371
zimmer;113000;legal;maya.zimmer@corp.example;maya;2023-03-05;281
varga;80000;sales;LEO.VARGA@CORP.EXAMPLE;leo;2017-03-18;353
T1_EOF
