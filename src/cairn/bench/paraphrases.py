# ruff: noqa: RUF001  (CJK punctuation and Cyrillic letters are the point of this file)
"""A small paraphrase-recall set in eight languages, written for Cairn (not from any benchmark).

Ten facts someone says about herself and, for each, a question that shares almost no words with
it; the same ten in every language, so the languages compare. ``recall_at_1`` embeds each
language's facts, asks its questions by vector similarity alone, and counts the questions whose
own fact comes first. It measures an embedder's meaning across scripts, not Cairn's ranking.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

# language -> [(fact, question)]
PARAPHRASES: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("I prefer green tea over coffee.", "What does she like to drink?"),
        ("My sister lives in Vancouver.", "Where is her sibling based?"),
        ("I work as a nurse at the city hospital.", "What is her job?"),
        ("We adopted a beagle last spring.", "Does she have a pet?"),
        ("I'm allergic to peanuts.", "Which food must she avoid?"),
        ("I play the violin in a small orchestra.", "What musical instrument does she play?"),
        ("My son starts university in September.", "When does her child begin college?"),
        ("I ran my first marathon in Berlin.", "Which race did she complete?"),
        ("We are moving to a bigger flat next month.", "Is she changing homes soon?"),
        ("I'm learning to speak Japanese.", "What language is she studying?"),
    ],
    "zh": [
        ("比起咖啡，我更喜欢绿茶。", "她喜欢喝什么？"),
        ("我姐姐住在温哥华。", "她的姐妹在哪个城市？"),
        ("我在市医院当护士。", "她做什么工作？"),
        ("去年春天我们领养了一只小猎犬。", "她养宠物吗？"),
        ("我对花生过敏。", "她不能吃哪种食物？"),
        ("我在一个小乐团里拉小提琴。", "她演奏什么乐器？"),
        ("我儿子九月开始上大学。", "她的孩子什么时候入学？"),
        ("我在柏林跑完了第一个马拉松。", "她完成了哪场比赛？"),
        ("下个月我们要搬到更大的公寓。", "她最近要搬家吗？"),
        ("我正在学说日语。", "她在学习哪种语言？"),
    ],
    "ja": [
        ("コーヒーより緑茶のほうが好きです。", "彼女は何を飲むのが好きですか？"),
        ("姉はバンクーバーに住んでいます。", "彼女のきょうだいはどこにいますか？"),
        ("市立病院で看護師として働いています。", "彼女の仕事は何ですか？"),
        ("去年の春にビーグルを迎えました。", "彼女はペットを飼っていますか？"),
        ("ピーナッツのアレルギーがあります。", "彼女が避けるべき食べ物は？"),
        ("小さなオーケストラでバイオリンを弾いています。", "彼女が演奏する楽器は？"),
        ("息子は九月に大学に入ります。", "彼女の子どもはいつ進学しますか？"),
        ("ベルリンで初めてのマラソンを走りました。", "彼女が完走したレースは？"),
        ("来月もっと広いアパートに引っ越します。", "彼女はもうすぐ転居しますか？"),
        ("日本語を話す練習をしています。", "彼女はどの言語を勉強していますか？"),
    ],
    "ru": [
        ("Я предпочитаю зелёный чай кофе.", "Что она любит пить?"),
        ("Моя сестра живёт в Ванкувере.", "Где находится её родственница?"),
        ("Я работаю медсестрой в городской больнице.", "Кем она работает?"),
        ("Прошлой весной мы взяли бигля.", "Есть ли у неё домашнее животное?"),
        ("У меня аллергия на арахис.", "Какой еды ей нужно избегать?"),
        ("Я играю на скрипке в небольшом оркестре.", "На каком инструменте она играет?"),
        ("Мой сын поступает в университет в сентябре.", "Когда её ребёнок начнёт учёбу?"),
        ("Я пробежала свой первый марафон в Берлине.", "Какой забег она завершила?"),
        ("В следующем месяце мы переезжаем в большую квартиру.", "Она скоро сменит жильё?"),
        ("Я учусь говорить по-японски.", "Какой язык она изучает?"),
    ],
    "de": [
        ("Ich trinke lieber grünen Tee als Kaffee.", "Was mag sie gern trinken?"),
        ("Meine Schwester wohnt in Vancouver.", "Wo lebt ihre Geschwister?"),
        ("Ich arbeite als Krankenschwester im Stadtkrankenhaus.", "Was ist ihr Beruf?"),
        ("Letzten Frühling haben wir einen Beagle adoptiert.", "Hat sie ein Haustier?"),
        ("Ich bin allergisch gegen Erdnüsse.", "Welches Essen muss sie meiden?"),
        ("Ich spiele Geige in einem kleinen Orchester.", "Welches Instrument spielt sie?"),
        ("Mein Sohn fängt im September an der Uni an.", "Wann beginnt ihr Kind das Studium?"),
        ("Ich bin meinen ersten Marathon in Berlin gelaufen.", "Welchen Lauf hat sie geschafft?"),
        ("Nächsten Monat ziehen wir in eine größere Wohnung.", "Zieht sie bald um?"),
        ("Ich lerne Japanisch sprechen.", "Welche Sprache studiert sie?"),
    ],
    "fr": [
        ("Je préfère le thé vert au café.", "Qu'aime-t-elle boire ?"),
        ("Ma sœur habite à Vancouver.", "Où vit sa sœur ?"),
        ("Je suis infirmière à l'hôpital de la ville.", "Quel est son métier ?"),
        ("Nous avons adopté un beagle au printemps dernier.", "A-t-elle un animal ?"),
        ("Je suis allergique aux cacahuètes.", "Quel aliment doit-elle éviter ?"),
        ("Je joue du violon dans un petit orchestre.", "De quel instrument joue-t-elle ?"),
        (
            "Mon fils entre à l'université en septembre.",
            "Quand son enfant commence-t-il ses études ?",
        ),
        ("J'ai couru mon premier marathon à Berlin.", "Quelle course a-t-elle terminée ?"),
        (
            "Le mois prochain, nous déménageons dans un plus grand appartement.",
            "Va-t-elle bientôt changer de logement ?",
        ),
        ("J'apprends à parler japonais.", "Quelle langue étudie-t-elle ?"),
    ],
    "es": [
        ("Prefiero el té verde al café.", "¿Qué le gusta beber?"),
        ("Mi hermana vive en Vancouver.", "¿Dónde reside su hermana?"),
        ("Trabajo como enfermera en el hospital de la ciudad.", "¿Cuál es su profesión?"),
        ("La primavera pasada adoptamos un beagle.", "¿Tiene alguna mascota?"),
        ("Soy alérgica a los cacahuetes.", "¿Qué comida debe evitar?"),
        ("Toco el violín en una pequeña orquesta.", "¿Qué instrumento toca?"),
        ("Mi hijo empieza la universidad en septiembre.", "¿Cuándo comienza sus estudios su hijo?"),
        ("Corrí mi primer maratón en Berlín.", "¿Qué carrera completó?"),
        ("El mes que viene nos mudamos a un piso más grande.", "¿Va a cambiar de casa pronto?"),
        ("Estoy aprendiendo a hablar japonés.", "¿Qué idioma estudia?"),
    ],
    "ar": [
        ("أفضّل الشاي الأخضر على القهوة.", "ماذا تحب أن تشرب؟"),
        ("أختي تعيش في فانكوفر.", "أين تقيم شقيقتها؟"),
        ("أعمل ممرضة في مستشفى المدينة.", "ما هي وظيفتها؟"),
        ("تبنّينا كلب بيغل في الربيع الماضي.", "هل لديها حيوان أليف؟"),
        ("لدي حساسية من الفول السوداني.", "ما الطعام الذي يجب أن تتجنبه؟"),
        ("أعزف الكمان في أوركسترا صغيرة.", "على أي آلة موسيقية تعزف؟"),
        ("ابني يبدأ الجامعة في سبتمبر.", "متى يبدأ طفلها الدراسة الجامعية؟"),
        ("ركضت أول ماراثون لي في برلين.", "أي سباق أكملت؟"),
        ("سننتقل إلى شقة أكبر الشهر القادم.", "هل ستغيّر مسكنها قريبًا؟"),
        ("أتعلم التحدث باللغة اليابانية.", "ما اللغة التي تدرسها؟"),
    ],
}


def recall_at_1(embed: Any, embed_query: Any = None) -> dict[str, Any]:
    """``embed(texts) -> vectors`` over every language: recall@1 per language, the mean, and
    the mean milliseconds to embed one question alone (with ``embed_query(text) -> vector``
    when given, as search embeds a query)."""
    per_language: dict[str, float] = {}
    query_ms: list[float] = []
    for language, pairs in PARAPHRASES.items():
        facts = np.asarray(embed([fact for fact, _ in pairs]), dtype=np.float32)
        hits = 0
        for i, (_, question) in enumerate(pairs):
            t0 = time.perf_counter()
            vec = embed_query(question) if embed_query else embed([question])[0]
            q = np.asarray(vec, dtype=np.float32)
            query_ms.append((time.perf_counter() - t0) * 1000)
            hits += int(np.argmax(facts @ q) == i)
        per_language[language] = hits / len(pairs)
    return {
        "recall_at_1": per_language,
        "mean": sum(per_language.values()) / len(per_language),
        "query_ms_p50": float(np.median(query_ms)),
    }
