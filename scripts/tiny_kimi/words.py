"""Word lists the synthetic conversations (synth.py) are filled from: meaningless text, plausible shapes."""

from __future__ import annotations

WORDS = """
the a an of to and in for on with that this it is was be are as at by from or not but have has had will would
can could should may might must we you they he she i people time year way day thing man world life hand part
child eye woman place work week case point government company number group problem fact system program question
city country story result change morning reason research girl guy moment air teacher force education food house
area water money market value plan energy model data process method table level order price value history music
light voice river garden window paper field power season island bridge engine signal pattern layer network cloud
simple quick small large early late important different useful common clear strong recent local public general
make take give find think know see come want look use tell ask work seem feel try leave call keep begin show
hear play run move live believe bring happen write provide sit stand lose pay meet include continue set learn
lead understand watch follow stop create speak read allow add spend grow open walk win offer remember consider
appear buy wait serve die send expect build stay fall cut reach kill remain suggest raise pass sell require
report decide pull explain develop carry break receive agree support hit produce eat cover catch draw choose
also very often then now here there still just only well even back again always never quite rather almost
first second third next last other same each every many few more most some any such own
""".split()

CAP_WORDS = """Alice Bob Carol Dave Eve Frank Grace Heidi Ivan Judy Mallory Oscar Peggy Trent Victor Walter
Python Rust Linux GitHub Paris London Tokyo Berlin Madrid Rome Cairo Lima Oslo Vienna Monday Friday""".split()

HAN = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处府理世".replace(" ", "")

IDENTS = "count total value items result index node graph tree cache buffer queue stack key name path size data".split()
VERBS_CODE = "sort merge parse filter compute count reverse find build check update split validate flatten".split()

CITIES = "Paris Tokyo London Berlin Denver Madrid Rome Seattle Austin Chicago Lisbon Boston Oslo Sydney Toronto Cairo".split()
CURRENCIES = "USD EUR GBP JPY CAD CHF INR AUD CNY".split()
LANGS = "Spanish German French Japanese Italian Korean Portuguese Chinese".split()
CATEGORIES = "sports technology business health science politics entertainment".split()
PLACES = "cafe pharmacy restaurant gas station park museum library hotel".split()
MOVIES = ["Inception", "The Matrix", "Interstellar", "Arrival", "Up", "Heat", "Alien", "Jaws"]
SONGS = ["Coldplay", "Bohemian Rhapsody", "Taylor Swift", "Yesterday", "Hey Jude", "Daft Punk"]
WORD_DEFS = "serendipity ephemeral ubiquitous eloquent resilient meticulous pragmatic".split()
DOMAINS = "example.com work.org corp.com mail.net school.edu".split()
NAMES_LOWER = "anna bob carol dave emma frank grace".split()
INGREDIENTS = "chicken rice eggs spinach cheese tomatoes basil garlic beans pasta".split()
STOCKS = "AAPL TSLA MSFT NVDA GOOG AMZN META IBM".split()
AIRLINES = "BA UA LH AF DL KL".split()
