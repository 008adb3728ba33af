# ruff: noqa: RUF001 -- text in many scripts is what these tests are about
"""Ranking of questions asked in other languages than English, through the real app on both
backends: Chinese, Japanese and Russian question words and particles do not decide what a
question finds, a Chinese one-character word finds the turn that has it, and chat filler ranks
below what was said."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.test_multilingual import search


def chat(client: TestClient, subject: str, turns: list[tuple[str, str]]) -> None:
    """Ingest and compile a two-person chat of ``(speaker, text)`` turns."""
    episodes = [
        {
            "subject_id": subject,
            "source": "chat",
            "type": "conversation.turn",
            "session_id": f"{subject}-1",
            "occurred_at": f"2024-03-01T10:{i:02d}:00Z",
            "payload": {"messages": [{"role": "user", "name": speaker, "content": text}]},
        }
        for i, (speaker, text) in enumerate(turns)
    ]
    r = client.post("/v1/episodes/batch", json={"episodes": episodes})
    assert r.status_code == 201, r.text
    r = client.post("/v1/memories/compile", json={"subject_id": subject})
    assert r.status_code == 200, r.text


GERMAN = [
    ("Lena", "Hey Jonas, wie geht es dir?"),
    ("Jonas", "Danke, gut! Und dir? Ist das Wetter bei dir auch so schlecht?"),
    ("Lena", "Ja, es ist für mich und für die Kinder ein Albtraum, das ist alles so nass."),
    ("Jonas", "Das ist ja für die ganze Familie blöd."),
    ("Lena", "Und ich bin übrigens allergisch gegen Erdnüsse, also keine Snacks damit!"),
    ("Jonas", "Bis dann!"),
    ("Lena", "Perfekt"),
    ("Jonas", "Mein Bruder zieht im Herbst nach Hamburg."),
]


def test_german_filler_ranks_below_what_was_said(backend_client: TestClient) -> None:
    chat(backend_client, "de", GERMAN)
    found = search(backend_client, "de", "Ist Lena gegen etwas allergisch, das für die Kinder ist?")
    assert "allergisch gegen Erdnüsse" in found[0]["content"], found
    # "Bis dann!" and "Perfekt" are filler: below any turn with content that matched.
    found = search(backend_client, "de", "Wann zieht der Bruder nach Hamburg, bis dann?")
    assert "Hamburg" in found[0]["content"], found


CHINESE = [
    ("林晓", "王浩！还活着吗？"),
    ("王浩", "早啊！"),
    ("王浩", "好好好"),
    ("王浩", "嗯嗯"),
    ("林晓", "我换工作了，现在在医院的检验科上班。"),
    ("王浩", "我们从救助站领养了一只猫，小小一只灰色的，叫年糕。"),
    ("林晓", "年糕！快发照片"),
    ("王浩", "我弟考上了武汉大学的临床医学。"),
]


def test_a_chinese_one_character_word_finds_its_turn(backend_client: TestClient) -> None:
    chat(backend_client, "zh", CHINESE)
    found = search(backend_client, "zh", "王浩的猫叫什么名字？")
    assert "领养了一只猫" in found[0]["content"], found


JAPANESE = [
    ("美咲", "健太、ひさしぶり！元気にしていますか？"),
    ("健太", "元気だよ。最近はずっと仕事をしていました。"),
    ("美咲", "うちは子犬を迎えたの。ビーグルでビスケって名前。"),
    ("健太", "親父が先週ひざの手術を受けて、しばらくうちで療養してる。"),
    ("美咲", "おやすみ！"),
]


def test_japanese_particles_do_not_decide_the_ranking(backend_client: TestClient) -> None:
    chat(backend_client, "ja", JAPANESE)
    found = search(backend_client, "ja", "美咲の犬の名前は何ですか？")
    assert "ビスケ" in found[0]["content"], found
    found = search(backend_client, "ja", "健太のお父さんは何の手術をしていましたか？")
    assert "手術" in found[0]["content"], found


RUSSIAN = [
    ("Ольга", "Какой ужас, какая погода!"),
    ("Дмитрий", "Какой-то кошмар, да."),
    ("Ольга", "Ладно, спокойной ночи"),
    ("Дмитрий", "Директор попросила меня вести шахматный кружок по четвергам."),
    ("Ольга", "Я готовлюсь к полумарафону в мае."),
]


def test_russian_question_words_do_not_decide_the_ranking(backend_client: TestClient) -> None:
    chat(backend_client, "ru", RUSSIAN)
    found = search(backend_client, "ru", "Какой кружок ведёт Дмитрий?")
    assert "шахматный кружок" in found[0]["content"], found
    found = search(backend_client, "ru", "К какому полумарафону готовится Ольга?")
    assert "полумарафону" in found[0]["content"], found
