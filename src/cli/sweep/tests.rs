use super::*;

#[test]
fn terms_evaluate_in_n() {
    let t = |s: &str| Term::parse(s).unwrap().eval(16);
    assert_eq!(t("3"), Ok(3));
    assert_eq!(t("n"), Ok(16));
    assert_eq!(t("n-1"), Ok(15));
    assert_eq!(t("n/4"), Ok(4));
    assert_eq!(t("3n/4"), Ok(12));
    assert_eq!(t("n/2+1"), Ok(9));
    assert_eq!(t("n-20"), Err("negative"));
    // 2^64 - 1 times 16 does not fit: that is no negative bound
    assert_eq!(
        t("18446744073709551615n"),
        Err("larger than the largest integer")
    );
    let e = Term::parse("x").expect_err("no n and no integer");
    assert!(
        e.contains("bound `x`: expected an integer or a term like n"),
        "{e}"
    );
    let e = Term::parse("n/0").expect_err("a division by zero");
    assert!(e.contains("bound `n/0`: division by zero"), "{e}");
}

#[test]
fn bound_items_parse() {
    let b = BoundSpec::parse("gcs=1:n-1").unwrap();
    assert_eq!(b.only, Some(Algorithm::Gcs));
    assert_eq!(b.l.unwrap().eval(8), Ok(1));
    assert_eq!(b.k.unwrap().eval(8), Ok(7));
    let b = BoundSpec::parse("1:").unwrap();
    assert!(b.l.is_some() && b.k.is_none());
    assert!(BoundSpec::parse("default").unwrap().l.is_none());
    let e = BoundSpec::parse("3").expect_err("one side only");
    assert!(e.contains("bounds `3`: expected L:K"), "{e}");
}

#[test]
fn ranges_expand() {
    let mut p = Vec::new();
    let v = parse_ints(
        &["1..=3".into(), "7".into(), "9..11".into()],
        "seeds",
        &mut p,
    );
    assert_eq!(v, vec![1, 2, 3, 7, 9, 10]);
    parse_ints(&["3..=1".into()], "seeds", &mut p);
    assert_eq!(p.len(), 1);
    // inclusive up to u64::MAX, with no bound past it
    let max = u64::MAX;
    let v = parse_ints(&[max.to_string()], "seeds", &mut p);
    assert_eq!(v, vec![max]);
    let v = parse_ints(&[format!("{}..={max}", max - 1)], "seeds", &mut p);
    assert_eq!(v, vec![max - 1, max]);
    let v = parse_ints(&[format!("{}..{max}", max - 1)], "seeds", &mut p);
    assert_eq!(v, vec![max - 1]);
    assert_eq!(p.len(), 1, "{p:?}");
}
